package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inputsPackage is a package whose one ConfigMap is the template tmpl (data entries), with
// helpers, a filter condition and an optional condition annotation.
func inputsPackage(tmpl, helpers, filter, condition string) fstest.MapFS {
	manifest := `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata: {name: p}
spec:
  phases: [{name: deploy}]
  config:
    openAPIV3Schema:
      type: object
      properties:
        mode: {type: string, default: simple}
        items: {type: array, items: {type: string}, default: [a]}
`
	if filter != "" {
		manifest += "  filter:\n    conditions:\n    - {name: f, expression: '" + filter + "'}\n"
	}
	annotations := "pkgsync.dev/phase: deploy"
	if condition != "" {
		annotations += ", package-operator.run/condition: '" + condition + "'"
	}
	fs := fstest.MapFS{
		"manifest.yaml":       {Data: []byte(manifest)},
		"objects.yaml.gotmpl": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations: {" + annotations + "}\ndata:\n" + tmpl)},
	}
	if helpers != "" {
		fs["_helpers.tpl"] = &fstest.MapFile{Data: []byte(helpers)}
	}
	return fs
}

// Result.Inputs says what of the installing resource a render read, conservatively: any
// branch a template could take counts, the whole context handed to a function counts as all.
func TestRenderInputs(t *testing.T) {
	t.Parallel()
	none, pkg, hc, both := Inputs{}, Inputs{Package: true}, Inputs{HostedCluster: true}, Inputs{Package: true, HostedCluster: true}
	tests := []struct {
		name                      string
		tmpl, helpers, filter, cd string
		want                      Inputs
	}{
		{name: "plain values", tmpl: "  a: b\n", want: none},
		{name: "configuration and cluster versions", tmpl: "  m: {{ .config.mode }}\n  v: {{ .environment.kubernetes.version }}\n  i: {{ len .images }}\n", want: none},
		{name: "the namespace", tmpl: "  ns: {{ .package.metadata.namespace }}\n", want: pkg},
		{name: "the name by its short path", tmpl: "  n: {{ .package.name }}\n", want: pkg},
		{name: "the HostedCluster", tmpl: "  hc: {{ with .environment.hyperShift }}{{ .hostedCluster.metadata.name }}{{ end }}\n", want: hc},
		{name: "the whole environment", tmpl: "  e: {{ toJson .environment | quote }}\n", want: hc},
		{name: "a branch the configuration does not take", tmpl: "{{ if eq .config.mode \"ha\" }}  n: {{ .package.metadata.name }}\n{{ end }}  a: b\n", want: pkg},
		{name: "the whole context", tmpl: "  all: {{ toJson . | quote }}\n", want: both},
		{name: "the root variable", tmpl: "{{ range .config.items }}  {{ . }}: {{ $.package.namespace }}\n{{ end }}", want: pkg},
		{name: "the root variable in a range", tmpl: "{{ range .config.items }}  {{ . }}: {{ $.config.mode }}\n{{ end }}", want: none},
		{name: "a variable", tmpl: "{{ $p := .package }}  n: {{ $p.name }}\n", want: pkg},
		{name: "get by key", tmpl: "  n: {{ get .package \"name\" }}\n", want: pkg},
		{name: "a helper given the context", helpers: `{{ define "mode" }}{{ .config.mode }}{{ end }}`, tmpl: "  m: {{ include \"mode\" . }}\n", want: none},
		{name: "a helper that reads the namespace", helpers: `{{ define "ns" }}{{ .package.namespace }}{{ end }}`, tmpl: "  ns: {{ include \"ns\" . }}\n", want: pkg},
		{name: "a helper through template", helpers: `{{ define "hc" }}{{ $.environment.hyperShift }}{{ end }}`, tmpl: "  hc: '{{ template \"hc\" . }}'\n", want: hc},
		{name: "a helper given a dict of the context", helpers: `{{ define "m" }}{{ .root.config.mode }}{{ end }}`, tmpl: "  m: {{ include \"m\" (dict \"root\" .) }}\n", want: both},
		{name: "a recursive helper", helpers: `{{ define "r" }}{{ if .config.mode }}{{ else }}{{ include "r" . }}{{ end }}{{ end }}`, tmpl: "  r: '{{ include \"r\" . }}'\n", want: none},
		{name: "cel reading the environment", tmpl: "  c: '{{ cel \"has(environment.hyperShift)\" }}'\n", want: hc},
		{name: "cel reading the configuration", tmpl: "  c: '{{ cel \"config.mode == \\\"x\\\"\" }}'\n", want: none},
		{name: "a filter reading the environment", tmpl: "  a: b\n", filter: `has(environment.hyperShift)`, want: hc},
		{name: "a condition annotation reading the environment", tmpl: "  a: b\n", cd: `environment.hyperShift.hostedCluster.metadata.name != ""`, want: hc},
		{name: "a condition annotation reading the cluster version", tmpl: "  a: b\n", cd: `environment.kubernetes.version != ""`, want: hc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), inputsPackage(tt.tmpl, tt.helpers, tt.filter, tt.cd), Options{
				Name: "n", Namespace: "ns", Environment: Environment{KubernetesVersion: "v1.36.3",
					HostedCluster: &HostedCluster{Name: "hc", Namespace: "clusters"}},
			})
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Inputs)
		})
	}
}

// A package without templates reads nothing of the resource; Only clears what was not read.
func TestInputsOnly(t *testing.T) {
	t.Parallel()
	opts := Options{Name: "n", Namespace: "ns", Labels: map[string]string{"a": "b"}, Image: "r/p:v1",
		Config: []byte(`{}`), Component: "c", Environment: Environment{KubernetesVersion: "v1.36.3", HostedCluster: &HostedCluster{Name: "hc"}}}
	assert.Equal(t, Options{Config: []byte(`{}`), Component: "c", Environment: Environment{KubernetesVersion: "v1.36.3"}}, Inputs{}.Only(opts))
	assert.Equal(t, opts, Inputs{Package: true, HostedCluster: true}.Only(opts))
	assert.True(t, Inputs{Package: true}.Covers(Inputs{}))
	assert.False(t, Inputs{Package: true}.Covers(Inputs{HostedCluster: true}))
}
