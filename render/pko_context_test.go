package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pkoExpr renders {{ EXPR }} in a Package Operator package whose configuration schema is
// schema (none when empty) and returns what it printed, or the render's error.
func pkoExpr(t *testing.T, schema string, opts Options, expr string) (string, error) {
	t.Helper()
	manifest := "apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n  images: [{name: app, image: 'quay.io/x/app:1'}]\n"
	if schema != "" {
		manifest += "  config:\n    openAPIV3Schema:\n" + indentLines(schema, "      ") + "\n"
	}
	fsys := fstest.MapFS{
		"manifest.yaml":      {Data: []byte(manifest)},
		"manifest.lock.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifestLock\nspec:\n  images: [{name: app, image: 'quay.io/x/app:1', digest: 'sha256:" + sha256Hex + "'}]\n")},
		"cm.yaml.gotmpl":     {Data: []byte(pkoConfigMap + "data:\n  v: |-\n    {{ " + expr + " }}\n")},
	}
	res, err := Render(t.Context(), fsys, opts)
	if err != nil {
		return "", err
	}
	return res.Phases[0].Objects[0].Object["data"].(map[string]any)["v"].(string), nil
}

const sha256Hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Package Operator builds its template context by encoding its render context (Go structs) to
// JSON and decoding it into map[string]any, then makes .package.metadata.labels and
// .annotations string maps when the Package has none, so that a missing key read with index
// gives "" (text/template's missingkey=error does not apply to index). Every value has the type
// that gives it there.
func TestPackageOperatorTemplateContextTypes(t *testing.T) {
	t.Parallel()
	schema := "type: object\nproperties:\n  num: {type: integer}\n  f: {type: number}\n  list: {type: array, items: {type: string}}\n  obj: {type: object, properties: {a: {type: string}}}"
	cfg := []byte(`{"num": 10000000, "f": 1.5, "list": ["a"], "obj": {"a": "b"}}`)
	full := Options{
		Name: "pkg", Namespace: "ns", Config: cfg, Image: "quay.io/x/pkg:1",
		Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "1"},
		Environment: Environment{
			KubernetesVersion: "v1.36.3", OpenShiftVersion: "4.21.2",
			Proxy:         &Proxy{HTTPProxy: "http://proxy:3128"},
			HostedCluster: &HostedCluster{Name: "demo", Namespace: "clusters", HostedClusterNamespace: "clusters-demo", PlatformType: "AWS"},
		},
	}
	tests := []struct {
		name string
		opts Options
		expr string
		want string
	}{
		{"no labels: a string map", Options{}, `printf "%T %T" .package.metadata.labels .package.metadata.annotations`, "map[string]string map[string]string"},
		{"missing annotation read with index, none set", Options{}, `index .package.metadata.annotations "x" | printf "%q"`, `""`},
		{"labels set: decoded from JSON", full, `printf "%T %T" .package.metadata.labels .package.metadata.annotations`, "map[string]interface {} map[string]interface {}"},
		{"missing annotation read with index, some set", full, `index .package.metadata.annotations "x"`, "<no value>"},
		// The API server never returns empty annotations; the controller's may be empty when it
		// took its own reconcile request annotation out, which must not change what renders.
		{"empty: as none", Options{Annotations: map[string]string{}}, `index .package.metadata.annotations "x" | printf "%q"`, `""`},
		{"config numbers are float64", full, `printf "%T %v %T %v" .config.num .config.num .config.f .config.f`, "float64 1e+07 float64 1.5"},
		{"config lists and objects", full, `printf "%T %T" .config.list .config.obj`, "[]interface {} map[string]interface {}"},
		{"images", full, `printf "%T %T %v" .images .images.app .images.app`, "map[string]interface {} string quay.io/x/app@sha256:" + sha256Hex},
		{"dependencies: always there, empty", full, `printf "%T %d" .dependencies (len .dependencies)`, "map[string]interface {} 0"},
		{"package", full, `printf "%v %v %v" .package.metadata.name .package.metadata.namespace .package.image`, "pkg ns quay.io/x/pkg:1"},
		{"proxy: empty fields left out", full, `printf "%v %v" (hasKey .environment.proxy "httpProxy") (hasKey .environment.proxy "noProxy")`, "true false"},
		{"hosted cluster: no labels is null", full, `printf "%v %T" .environment.hyperShift.hostedCluster.metadata.labels .environment.hyperShift.hostedCluster.metadata.labels`, "<nil> <nil>"},
		{"hosted cluster: no node selector, no key", full, `hasKey .environment.hyperShift.hostedCluster "nodeSelector"`, "false"},
		{"hosted cluster: platform, pkgsync's addition", full, `.environment.hyperShift.hostedCluster.platform.type`, "AWS"},
		{"openShift", full, `printf "%v %v" .environment.openShift.version (hasKey .environment.openShift "managed")`, "4.21.2 false"},
		{"managed OpenShift data", Options{Environment: Environment{OpenShiftVersion: "4.21.2", OpenShiftManaged: &ManagedOpenShift{Data: map[string]string{"k": "v"}}}}, `.environment.openShift.managed.data.k`, "v"},
		{"HyperShift without a hosted cluster", Options{Environment: Environment{HyperShift: true}}, `printf "%v %v" (hasKey .environment.hyperShift "hostedCluster") .environment.hyperShift.hostedCluster`, "true <nil>"},
		{"no schema: the configuration is dropped", Options{Config: []byte(`{"x": 1}`)}, `len .config`, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := schema
			if tt.name == "no schema: the configuration is dropped" {
				s = ""
			}
			got, err := pkoExpr(t, s, tt.opts, tt.expr)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// What fails in Package Operator's context fails in pkgsync's, for a Package Operator package.
func TestPackageOperatorTemplateContextErrors(t *testing.T) {
	t.Parallel()
	schema := "type: object\nproperties:\n  num: {type: integer}"
	full := Options{Config: []byte(`{"num": 3}`), Labels: map[string]string{"l": "1"}, Environment: Environment{HostedCluster: &HostedCluster{Name: "demo"}}}
	tests := []struct {
		name string
		opts Options
		expr string
		want string
	}{
		{"missing key read as a field", full, `.package.metadata.labels.x`, `has no key "x"`},
		{"missing key of a string map read as a field", Options{}, `.package.metadata.labels.x`, `.package.metadata.labels has no key "x" (it has none); test for an optional key with {{ index .package.metadata.labels "x" | default "d" }}`},
		{"hasKey of a string map", Options{}, `hasKey .package.metadata.labels "x"`, "wrong type for value; expected map[string]interface {}; got map[string]string"},
		{"a float compared with an integer", full, `eq .config.num 3`, "incompatible types for comparison"},
		{"no .package.name shorthand", full, `.package.name`, `has no key "name"`},
		{"no .package.namespace shorthand", full, `.package.namespace`, `has no key "namespace"`},
		{"null hosted-cluster labels", full, `index .environment.hyperShift.hostedCluster.metadata.labels "x"`, "index of untyped nil"},
		{"no openShift", full, `.environment.openShift.version`, `has no key "openShift"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := pkoExpr(t, schema, tt.opts, tt.expr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// The configuration is pruned as Package Operator prunes it: as the root of a resource, so
// apiVersion, kind and metadata stay even when the schema does not name them.
func TestPackageOperatorConfigPrunedAsAResourceRoot(t *testing.T) {
	t.Parallel()
	got, err := pkoExpr(t, "type: object\nproperties:\n  num: {type: integer}", Options{Config: []byte(`{"kind": "K", "other": 1, "num": 2}`)}, `printf "%v %v" .config.kind (hasKey .config "other")`)
	require.NoError(t, err)
	assert.Equal(t, "K false", got)
}

// A test case's context reaches templates as Package Operator passes it: the name as given
// (empty stays empty), annotations absent or written empty (a map decoded from JSON there),
// managed OpenShift data, and a HyperShift section without a hosted cluster.
func TestPackageOperatorTestCaseContext(t *testing.T) {
	t.Parallel()
	manifest := `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: p}
spec:
  scopes: [Namespaced, Cluster]
  phases: [{name: deploy}]
test:
  template:
  - name: bare
  - name: full
    context:
      package: {metadata: {name: full, annotations: {}}}
      environment:
        openShift: {version: 4.21.2, managed: {data: {k: v}}}
        hyperShift: {}
`
	tmpl := pkoConfigMap + `data:
  name: '{{ .package.metadata.name }}'
  annotation: '{{ index .package.metadata.annotations "x" }}'
  managed: '{{ if hasKey .environment "openShift" }}{{ .environment.openShift.managed.data.k }}{{ end }}'
  hostedCluster: '{{ if hasKey .environment "hyperShift" }}{{ .environment.hyperShift.hostedCluster }}{{ end }}'
`
	fsys := fstest.MapFS{"manifest.yaml": {Data: []byte(manifest)}, "cm.yaml.gotmpl": {Data: []byte(tmpl)}}
	tests, err := ReadTemplateTests(fsys)
	require.NoError(t, err)
	require.Len(t, tests.Cases, 2)
	want := map[string]map[string]any{
		"bare": {"name": "", "annotation": "", "managed": "", "hostedCluster": ""},
		"full": {"name": "full", "annotation": "<no value>", "managed": "v", "hostedCluster": "<no value>"},
	}
	for _, tc := range tests.Cases {
		res, err := RenderTestCase(t.Context(), fsys, tc)
		require.NoError(t, err, tc.Name)
		assert.Equal(t, want[tc.Name], res.Phases[0].Objects[0].Object["data"], tc.Name)
	}
}
