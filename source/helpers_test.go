package source

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// readTree lists the regular files of fsys with their content.
func readTree(t testing.TB, fsys fs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		out[name] = string(data)
		return err
	}))
	return out
}

// pushOther pushes a package with other content under HOST/REPO:TAG and returns its digest.
func pushOther(t *testing.T, c *Client, ref Reference, content string) string {
	t.Helper()
	dir := testenv.PackageDir(t)
	testenv.WriteTree(t, dir, map[string]string{"deploy/extra.yaml": content})
	img, err := Build(dir, BuildOptions{Version: "1.0.1"})
	require.NoError(t, err)
	_, err = c.Push(t.Context(), img, []Reference{ref}, nil)
	require.NoError(t, err)
	return img.Digest
}
