package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/render"
)

// TestMakeV2 renders both versions of the example: version 2 must differ exactly as the demo
// tells (a new greeting, one Role fewer), or the demo's story would be wrong.
func TestMakeV2(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "..", "packages-example", "hosted-addon")
	dst := filepath.Join(t.TempDir(), "v2")
	require.NoError(t, makeV2(src, dst))

	type summary struct {
		greeting string
		roles    []string
		objects  int
	}
	summarize := func(dir string) summary {
		res, err := render.Render(t.Context(), os.DirFS(dir), render.Options{Name: "demo", Namespace: hcpNamespace})
		require.NoError(t, err)
		var s summary
		for _, ph := range res.Phases {
			for _, obj := range ph.Objects {
				s.objects++
				switch obj.GetKind() {
				case "ConfigMap":
					s.greeting = obj.Object["data"].(map[string]any)["greeting"].(string)
				case "Role":
					s.roles = append(s.roles, obj.GetName())
				}
			}
		}
		return s
	}
	v1, v2 := summarize(src), summarize(dst)

	assert.Equal(t, []string{v2DroppedRole}, v1.roles)
	assert.Empty(t, v2.roles)
	assert.Equal(t, v1.objects-1, v2.objects)
	assert.NotEqual(t, v2Greeting, v1.greeting)
	assert.Equal(t, v2Greeting, v2.greeting)
}

func TestMakeV2FailsWhenTheExampleChanged(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "manifest.yaml"), []byte("kind: PackageManifest\n"), 0o644))
	err := makeV2(src, filepath.Join(t.TempDir(), "v2"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "update test/demo/package_v2.go")
}
