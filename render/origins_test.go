package render

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RenderLocated says where each object came from, and which manifest the render read, even
// when the render fails.
func TestRenderLocated(t *testing.T) {
	t.Parallel()
	const manifest = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  scopes: [Cluster]\n  phases:\n  - name: deploy\n"
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  annotations:\n    pkgsync.dev/phase: deploy\n"
	fsys := fstest.MapFS{
		"manifest.yaml":  {Data: []byte(manifest)},
		"deploy/cm.yaml": {Data: []byte("# two\n" + fmt.Sprintf(cm, "one") + "---\n" + fmt.Sprintf(cm, "two"))},
	}
	l, err := RenderLocated(t.Context(), fsys, Options{Namespace: "team"}, WithoutConfig)
	require.NoError(t, err)
	require.NotNil(t, l.Result)
	assert.Equal(t, "manifest.yaml", l.ManifestFile)
	require.NotNil(t, l.Manifest)
	objs := l.Result.Phases[0].Objects
	require.Len(t, objs, 2)
	at := l.Origin(objs[1])
	require.NotNil(t, at)
	assert.Equal(t, "deploy/cm.yaml", at.File)
	assert.Equal(t, 2, at.Document)
	assert.Equal(t, 9, at.Line, "the document's first line")
	assert.Nil(t, at.Err)

	fsys["deploy/bad.yaml"] = &fstest.MapFile{Data: []byte("kind: [\n")}
	l, err = RenderLocated(t.Context(), fsys, Options{}, WithConfig)
	require.Error(t, err)
	require.NotNil(t, l)
	assert.Nil(t, l.Result)
	assert.Equal(t, "manifest.yaml", l.ManifestFile, "the manifest is known when the render fails")

	plain, err := Render(t.Context(), fstest.MapFS{"manifest.yaml": {Data: []byte(manifest)}}, Options{})
	require.NoError(t, err)
	assert.NotNil(t, plain)
}
