package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The root component of a multi-component package may hold two objects that map the same
// destination (Package Operator's own multi-component test packages do: a frontend and a
// backend Package, each mapping Progressing), and so may a component; each component is
// rendered on its own.
func TestConditionMapSameDestinationInAComponent(t *testing.T) {
	t.Parallel()
	manifest := func(name, extra string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: " + name + "}\nspec:\n  scopes: [Namespaced]\n  phases: [{name: deploy}]\n" + extra)}
	}
	mapped := func(name string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  annotations:\n    package-operator.run/phase: deploy\n    package-operator.run/condition-map: Progressing => shop.example.com/Progressing\n" +
			"spec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n    spec: {containers: [{name: c, image: nginx}]}\n")}
	}
	fsys := fstest.MapFS{
		"manifest.yaml":                     manifest("shop", "  components: {}\n"),
		"backend.yaml":                      mapped("backend"),
		"frontend.yaml":                     mapped("frontend"),
		"components/backend/manifest.yaml":  manifest("backend", ""),
		"components/backend/app.yaml":       mapped("app"),
		"components/backend/other.yaml":     mapped("other"),
		"components/frontend/manifest.yaml": manifest("frontend", ""),
		"components/frontend/app.yaml":      mapped("app"),
	}
	require.NoError(t, ValidateStructure(t.Context(), fsys, Options{}), "a build checks every component, each on its own")
	for _, c := range []string{"", "backend", "frontend"} {
		res, err := Render(t.Context(), fsys, Options{Component: c})
		require.NoError(t, err, c)
		want := 2
		if c == "frontend" {
			want = 1
		}
		require.Len(t, res.Phases[0].ConditionMappings, want, c)
		for _, m := range res.Phases[0].ConditionMappings {
			assert.Equal(t, "shop.example.com/Progressing", m.Destination, c)
		}
	}
}
