package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Only one component of a multi-component package is installed per Package, so two
// components may map the same destination; within one component a destination is mapped once.
func TestConditionMapIsCheckedPerComponent(t *testing.T) {
	t.Parallel()
	manifest := func(name, extra string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: " + name + "}\nspec:\n  scopes: [Namespaced]\n  phases: [{name: deploy}]\n" + extra)}
	}
	mapped := func(name string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  annotations:\n    package-operator.run/phase: deploy\n    package-operator.run/condition-map: Available => shop.example.com/Available\n")}
	}
	fsys := fstest.MapFS{
		"manifest.yaml":                     manifest("shop", "  components: {}\n"),
		"components/backend/manifest.yaml":  manifest("backend", ""),
		"components/backend/app.yaml":       mapped("backend"),
		"components/frontend/manifest.yaml": manifest("frontend", ""),
		"components/frontend/app.yaml":      mapped("frontend"),
	}
	require.NoError(t, ValidateStructure(t.Context(), fsys, Options{}), "a build checks every component, each on its own")
	for _, c := range []string{"backend", "frontend"} {
		res, err := Render(t.Context(), fsys, Options{Component: c})
		require.NoError(t, err, c)
		require.Len(t, res.Phases[0].ConditionMappings, 1)
		assert.Equal(t, "shop.example.com/Available", res.Phases[0].ConditionMappings[0].Destination)
	}

	fsys["components/backend/other.yaml"] = mapped("other")
	_, err := Render(t.Context(), fsys, Options{Component: "backend"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `components/backend/other.yaml:1 (document 1): metadata.annotations.package-operator.run/condition-map: Deployment other: destination "shop.example.com/Available" is already mapped by components/backend/app.yaml`)
	assert.Error(t, ValidateStructure(t.Context(), fsys, Options{}))
}
