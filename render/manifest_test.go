package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodedManifestsAreKeptByContent: a manifest read again is served from memory as a copy
// of its own (a caller's change does not reach the next), and a manifest whose bytes changed is
// decoded anew, errors included.
func TestDecodedManifestsAreKeptByContent(t *testing.T) {
	t.Parallel()
	manifest := "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: kept-by-content\nspec:\n  phases:\n  - name: a\n"
	fsys := fstest.MapFS{"manifest.yaml": {Data: []byte(manifest)}}
	first, _, errs := readManifest(fsys)
	require.Empty(t, errs)
	first.Spec.Phases[0].Name = "changed by a caller"
	second, _, errs := readManifest(fsys)
	require.Empty(t, errs)
	assert.Equal(t, "a", second.Spec.Phases[0].Name)
	assert.NotSame(t, first, second)

	fsys["manifest.yaml"] = &fstest.MapFile{Data: []byte(manifest + "  - name: a\n")}
	_, _, errs = readManifest(fsys)
	require.NotEmpty(t, errs, "a duplicate phase is found in the new bytes")
	fsys["manifest.yaml"] = &fstest.MapFile{Data: []byte(manifest)}
	again, _, errs := readManifest(fsys)
	require.Empty(t, errs)
	assert.Equal(t, second, again)
}
