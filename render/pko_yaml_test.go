package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoAnnotations is an object whose metadata repeats the annotations key: the first holds
// the phase, the second an annotation of its own and the phase again.
const twoAnnotations = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  annotations:
    first: dropped
  labels: {app: x}
  annotations:
    second: kept
    package-operator.run/phase: deploy
    pkgsync.dev/phase: deploy
data: {a: "1", a: "2"}
`

// Package Operator decodes object files with sigs.k8s.io/yaml's Unmarshal (go.yaml.in/yaml/v2,
// not strict): a key repeated in a mapping replaces the earlier one, value and all. Its own test
// packages hold a Deployment with two annotations keys, which it calls valid. pkgsync decodes a
// Package Operator package's objects the same way; in its own format it refuses the repeated key.
func TestPackageOperatorRepeatedYAMLKeys(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"cm.yaml", "cm.yaml.gotmpl"} {
		res, err := Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{file: twoAnnotations}), Options{})
		require.NoError(t, err, file)
		obj := res.Phases[0].Objects[0]
		assert.Equal(t, map[string]string{"second": "kept"}, obj.GetAnnotations(), "the later key wins, and the earlier mapping is gone")
		assert.Equal(t, map[string]any{"a": "2"}, obj.Object["data"])
	}

	own := fstest.MapFS{
		"manifest.yaml": {Data: []byte("apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  phases: [{name: deploy}]\n")},
		"cm.yaml":       {Data: []byte(twoAnnotations)},
	}
	_, err := Render(t.Context(), own, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `cm.yaml:9 (document 1): invalid YAML: yaml: unmarshal errors:`)
	assert.Contains(t, err.Error(), `key "annotations" already set in map`)
}

// Documents that decode to nothing (empty, comments, null) hold no object, in Package
// Operator's decoding as in pkgsync's.
func TestPackageOperatorEmptyDocuments(t *testing.T) {
	t.Parallel()
	file := "null\n---\n# only a comment\n---\n" + pkoConfigMap + "---\n~\n---\n"
	res, err := Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{"cm.yaml": file}), Options{})
	require.NoError(t, err)
	require.Len(t, res.Phases[0].Objects, 1)
	assert.Equal(t, "cm", res.Phases[0].Objects[0].GetName())
}
