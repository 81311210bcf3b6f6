package render

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A template that reads a key its map does not have fails, as in Package Operator
// (missingkey=error there too), with an error that names the keys the map has and the ways to
// test for an optional key, and for Helm's top-level names, where their values are.
func TestTemplateMissingKeyErrors(t *testing.T) {
	t.Parallel()
	const pkgsyncManifest = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  phases: [{name: one}]\n" +
		"  config:\n    openAPIV3Schema:\n      type: object\n      properties:\n        replicas: {type: integer, default: 1}\n        image: {type: string, default: x}\n"
	const pkoManifest = "apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  scopes: [Namespaced]\n  phases: [{name: one}]\n" +
		"  config:\n    openAPIV3Schema:\n      type: object\n      properties:\n        replicas: {type: integer, default: 1}\n        image: {type: string, default: x}\n"
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {package-operator.run/phase: one}}\ndata:\n  v: \"%s\"\n"
	tests := []struct {
		name     string
		manifest string
		tmpl     string
		helper   string
		want     string
	}{{
		name:     "a configuration key with default",
		manifest: pkgsyncManifest,
		tmpl:     `{{ .config.x | default "d" }}`,
		want: `a.yaml.gotmpl:5: template: executing "a.yaml.gotmpl" at <.config.x>: .config has no key "x" (it has: image, replicas); ` +
			`test for an optional key with {{ if hasKey .config "x" }} or {{ index .config "x" | default "d" }}`,
	}, {
		name:     "Helm's .Release",
		manifest: pkgsyncManifest,
		tmpl:     `{{ .Release.Name }}`,
		want: `a.yaml.gotmpl:5: template: executing "a.yaml.gotmpl" at <.Release.Name>: the context has no key "Release" (it has: .config, .environment, .images, .package); ` +
			`Helm's .Release is not there: the Package's name is .package.metadata.name, its namespace .package.metadata.namespace`,
	}, {
		name:     "Helm's .Values in Package Operator's format",
		manifest: pkoManifest,
		tmpl:     `{{ $.Values.replicas }}`,
		want: `a.yaml.gotmpl:5: template: executing "a.yaml.gotmpl" at <$.Values.replicas>: the context has no key "Values" (it has: .config, .dependencies, .environment, .images, .package); ` +
			`Helm's .Values is not there: the configuration is .config`,
	}, {
		name:     "inside with, where dot is another value: no list",
		manifest: pkgsyncManifest,
		tmpl:     `{{ with .config }}{{ .x }}{{ end }}`,
		want: `a.yaml.gotmpl:5: template: executing "a.yaml.gotmpl" at <.x>: . has no key "x"; ` +
			`test for an optional key with {{ if hasKey . "x" }} or {{ index . "x" | default "d" }}`,
	}, {
		name:     "in a helper",
		manifest: pkgsyncManifest,
		tmpl:     `{{ include "h" . }}`,
		helper:   `{{ define "h" }}{{ .config.y }}{{ end }}`,
		want:     `.config has no key "y"; test for an optional key with {{ if hasKey .config "y" }} or {{ index .config "y" | default "d" }}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{
				"manifest.yaml":      {Data: []byte(tt.manifest)},
				"a.yaml.gotmpl":      {Data: []byte(fmt.Sprintf(cm, tt.tmpl))},
				"manifest.lock.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifestLock\nspec: {images: []}\n")},
			}
			if tt.helper != "" {
				fsys["_helpers.tpl"] = &fstest.MapFile{Data: []byte(tt.helper)}
			}
			_, err := Render(t.Context(), fsys, Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
