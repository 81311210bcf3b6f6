package render

import (
	"io/fs"
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const componentsPkg = "testdata/packages/pko-components"

func TestComponentsSelectOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		component string
		config    string
		want      []string
	}{
		{"", "", []string{"shop-root"}},
		{"backend", "", []string{"shop", "addon-api"}},
		{"backend", `{"debug": true}`, []string{"shop", "addon-api", "addon-debug"}},
		{"frontend", "", []string{"shop-ui"}},
	}
	for _, tt := range tests {
		t.Run(tt.component+tt.config, func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), os.DirFS(componentsPkg), Options{Name: "addon", Namespace: "apps", Component: tt.component, Config: []byte(tt.config)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, objectNames(t, res))
		})
	}
	res, err := Render(t.Context(), os.DirFS(componentsPkg), Options{Component: "backend"})
	require.NoError(t, err)
	assert.Equal(t, "shop-backend", res.Manifest.Name, "the component's own manifest")
	assert.Equal(t, "hosted-cluster", res.Phases[0].Class)
}

// A build checks the root and every component: a broken component fails it, named by its
// path in the package.
func TestComponentsValidateStructureChecksEveryComponent(t *testing.T) {
	t.Parallel()
	fsys := copyDir(t, componentsPkg)
	require.NoError(t, ValidateStructure(t.Context(), fsys, Options{}))

	fsys["components/frontend/bad.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")}
	err := ValidateStructure(t.Context(), fsys, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "components/frontend/bad.yaml:1 (document 1): metadata.annotations: ConfigMap x: missing phase")
	// Rendering the root does not read the components.
	_, err = Render(t.Context(), fsys, Options{})
	require.NoError(t, err)
}

func TestComponentsRules(t *testing.T) {
	t.Parallel()
	rootManifest := func(components bool) *fstest.MapFile {
		m := "apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: r}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n"
		if components {
			m += "  components: {}\n"
		}
		return &fstest.MapFile{Data: []byte(m)}
	}
	compManifest := &fstest.MapFile{Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: c}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n")}
	nested := &fstest.MapFile{Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: c}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n  components: {}\n")}
	obj := &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: in-components\n  annotations: {package-operator.run/phase: deploy}\n")}

	tests := []struct {
		name      string
		fsys      fstest.MapFS
		component string
		want      string
	}{
		{
			name:      "not a multi-component package",
			fsys:      fstest.MapFS{"manifest.yaml": rootManifest(false), "components/a/manifest.yaml": compManifest},
			component: "a",
			want:      `manifest.yaml: spec.components: component "a" requested, but the package is not a multi-component package`,
		},
		{
			name:      "unknown component",
			fsys:      fstest.MapFS{"manifest.yaml": rootManifest(true), "components/a/manifest.yaml": compManifest, "components/b/manifest.yaml": compManifest},
			component: "c",
			want:      `components/: no component "c": the package has a, b`,
		},
		{
			name:      "nested components",
			fsys:      fstest.MapFS{"manifest.yaml": rootManifest(true), "components/a/manifest.yaml": nested},
			component: "a",
			want:      "components/a/manifest.yaml: spec.components: components nest only one level",
		},
		{
			name: "file in components/",
			fsys: fstest.MapFS{"manifest.yaml": rootManifest(true), "components/x.yaml": obj},
			want: "components/x.yaml: components/ holds one directory per component, not files",
		},
		{
			name: "bad component name",
			fsys: fstest.MapFS{"manifest.yaml": rootManifest(true), "components/Back_End/manifest.yaml": compManifest},
			want: `components/Back_End/: invalid component name "Back_End"`,
		},
		{
			name: "component without manifest",
			fsys: fstest.MapFS{"manifest.yaml": rootManifest(true), "components/a/x.yaml": obj},
			want: "components/a/manifest.yaml: missing: every component needs its own manifest.yaml",
		},
		{
			name:      "errors name the component's files",
			fsys:      fstest.MapFS{"manifest.yaml": rootManifest(true), "components/a/manifest.yaml": compManifest, "components/a/x.yaml": {Data: []byte("kind: [")}},
			component: "a",
			want:      "components/a/x.yaml:1 (document 1): invalid YAML",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(t.Context(), tt.fsys, Options{Component: tt.component})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	// Without spec.components, components/ is an ordinary directory of the root package, as
	// Package Operator keeps it for packages written before components existed.
	res, err := Render(t.Context(), fstest.MapFS{"manifest.yaml": rootManifest(false), "components/x.yaml": obj}, Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"in-components"}, objectNames(t, res))
}

// copyDir reads a directory into a MapFS that a test may change.
func copyDir(t *testing.T, dir string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	src := os.DirFS(dir)
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(src, p)
		out[p] = &fstest.MapFile{Data: data}
		return err
	})
	require.NoError(t, err)
	return out
}

func TestUnsupportedPackageOperatorFieldsAreRefused(t *testing.T) {
	t.Parallel()
	for field, body := range map[string]string{
		"spec.dependencies": "  dependencies:\n  - image: {name: dep, package: quay.io/x/dep, range: '>=1'}\n",
		"spec.repositories": "  repositories:\n  - image: quay.io/x/repo:v1\n",
	} {
		fsys := fstest.MapFS{"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: r}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n" + body)}}
		err := ValidateStructure(t.Context(), fsys, Options{})
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), "manifest.yaml: "+field+": not supported")
	}
}
