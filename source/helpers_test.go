package source

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const testManifest = `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: demo
spec:
  phases:
  - name: deploy
`

// writeTree writes files (path → content) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
}

// newPackageDir writes a small package and returns its directory.
func newPackageDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml":          testManifest,
		"deploy/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\n",
		"deploy/_helpers.tpl":    "{{ define \"x\" }}{{ end }}",
		"config.yaml.gotmpl":     "a: {{ .config.a }}\n",
	})
	return dir
}

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
	dir := newPackageDir(t)
	writeTree(t, dir, map[string]string{"deploy/extra.yaml": content})
	img, err := Build(dir, BuildOptions{Version: "1.0.1"})
	require.NoError(t, err)
	_, err = c.Push(t.Context(), img, []Reference{ref}, nil)
	require.NoError(t, err)
	return img.Digest
}
