package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// PackageManifest is the manifest of the small package PackageDir writes: one phase, deploy.
const PackageManifest = `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: demo
spec:
  phases:
  - name: deploy
`

// WriteTree writes files (path → content) under dir.
func WriteTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
}

// PackageDir writes a small package (PackageManifest, a Deployment, a helper template and a
// templated file) and returns its directory.
func PackageDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	WriteTree(t, dir, map[string]string{
		"manifest.yaml":          PackageManifest,
		"deploy/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\n",
		"deploy/_helpers.tpl":    "{{ define \"x\" }}{{ end }}",
		"config.yaml.gotmpl":     "a: {{ .config.a }}\n",
	})
	return dir
}
