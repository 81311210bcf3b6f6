package render

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// celTemplatePackage is a Package Operator package with one named condition and one template.
func celTemplatePackage(tmpl string) fstest.MapFS {
	manifest := `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: p}
spec:
  scopes: [Namespaced, Cluster]
  phases: [{name: deploy}]
  config:
    openAPIV3Schema:
      type: object
      properties:
        mode: {type: string, default: simple}
        items: {type: array, items: {type: integer}}
  filter:
    conditions:
    - {name: isHA, expression: 'config.mode == "ha"'}
`
	return fstest.MapFS{
		"manifest.yaml":       {Data: []byte(manifest)},
		"objects.yaml.gotmpl": {Data: []byte(tmpl)},
		"_helpers.tpl":        {Data: []byte(`{{ define "ha" }}{{ cel "cond.isHA" }}{{ end }}`)},
	}
}

const celTemplateObject = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  annotations: {package-operator.run/phase: deploy}
data:
  ha: "{{ cel "cond.isHA" }}"
  fromHelper: "{{ include "ha" . }}"
  big: "{{ cel "size(config.mode) > 3 && !has(config.items)" }}"
{{- if cel "cond.isHA && environment.kubernetes.version.startsWith('v1.36')" }}
  extra: "yes"
{{- end }}
`

// The cel template function evaluates an expression in the template context, with the named
// conditions as cond.NAME, as Package Operator's does.
func TestCELTemplateFunction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		config string
		want   map[string]any
	}{
		{``, map[string]any{"ha": "false", "fromHelper": "false", "big": "true"}},
		{`{"mode": "ha"}`, map[string]any{"ha": "true", "fromHelper": "true", "big": "false", "extra": "yes"}},
	}
	for _, tt := range tests {
		res, err := Render(t.Context(), celTemplatePackage(celTemplateObject), Options{Config: []byte(tt.config), Environment: Environment{KubernetesVersion: "v1.36.3"}})
		require.NoError(t, err)
		require.Len(t, res.Phases[0].Objects, 1)
		assert.Equal(t, tt.want, res.Phases[0].Objects[0].Object["data"], "config %s", tt.config)
	}
}

func TestCELTemplateFunctionErrors(t *testing.T) {
	t.Parallel()
	items := make([]string, 300)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	bigConfig := `{"items": [` + strings.Join(items, ",") + `]}`
	distinct := "{{ range $i := until 1001 }}{{ cel (printf \"%d == %d\" $i $i) }}{{ end }}"
	tests := []struct {
		name   string
		tmpl   string
		config string
		want   []string
	}{
		{"syntax", "a: {{ cel \"config.mode ==\" }}", "", []string{"objects.yaml.gotmpl:1", `CEL expression "config.mode =="`, "Syntax error"}},
		{"not a bool", "a: 1\n{{ cel \"config.mode\" }}", "", []string{"objects.yaml.gotmpl:2", "must return a bool, not string"}},
		{"missing key", "{{ cel \"config.nothere\" }}", "", []string{"objects.yaml.gotmpl:1", "no such key: nothere"}},
		{"undeclared", "{{ cel \"self.x\" }}", "", []string{"undeclared reference to 'self'"}},
		{"no argument", "{{ cel }}", "", []string{"objects.yaml.gotmpl:1", "cel"}},
		// Attacks: the bounds of the manifest's expressions hold here too.
		{"cost limit", "{{ cel \"config.items.all(a, config.items.all(b, config.items.all(c, a + b + c >= 0)))\" }}", bigConfig, []string{"objects.yaml.gotmpl:1", "cost limit exceeded"}},
		{"size", "{{ cel \"" + strings.Repeat("true && ", 2000) + "true\" }}", "", []string{"objects.yaml.gotmpl:1", "over the 10000 byte limit"}},
		{"nesting", "{{ cel \"" + strings.Repeat("(", 200) + "true" + strings.Repeat(")", 200) + "\" }}", "", []string{"objects.yaml.gotmpl:1", "CEL expression"}},
		{"distinct expressions", distinct, "", []string{"objects.yaml.gotmpl:1", "over 1000 different CEL expressions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(t.Context(), celTemplatePackage(tt.tmpl), Options{Config: []byte(tt.config)})
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// A build checks templates without executing them: a package calling cel parses.
func TestCELTemplateFunctionValidateStructure(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateStructure(t.Context(), celTemplatePackage(celTemplateObject), Options{}))
}
