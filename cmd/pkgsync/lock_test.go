package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/test/testenv"
)

// writePKOPackage writes a Package Operator package, in its image layout (package/), whose one
// image is image.
func writePKOPackage(t *testing.T, image string) string {
	t.Helper()
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	files := map[string]string{
		"manifest.yaml": `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: locked}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
  images: [{name: app, image: "` + image + `"}]
`,
		"cm.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  annotations: {package-operator.run/phase: deploy}
data: {image: "{{ .images.app }}"}
`,
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(pkg, name), []byte(content), 0o644))
	}
	return dir
}

func TestLockResolvesImagesThroughTheRegistry(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	dockerConfig := emptyDockerConfig(t)
	simple := reg.Host + "/" + testenv.Repository(t, "simple")
	image := simple + ":v1"
	out, err := runPkgsync(t, "build", "../../packages-example/simple", "--tag", image, "--push", "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)
	digest := strings.TrimSpace(out)

	dir := writePKOPackage(t, image)

	// Unlocked: validate fails, says why and how to fix it.
	_, stderr, err := runCLI(t, "validate", dir)
	require.Error(t, err)
	assert.Contains(t, stderr, "manifest.lock.yaml: images not locked: missing")
	assert.Contains(t, stderr, `hint: run "pkgsync lock `+dir+`"`)

	stdout, stderr, err := runCLI(t, "lock", dir, "--registry-config", dockerConfig)
	require.NoError(t, err, stderr)
	lockFile := filepath.Join(dir, "package", render.LockFile)
	assert.Equal(t, lockFile+"\n", stdout)
	assert.Equal(t, "app: "+image+" is "+digest+"\n", stderr)
	lock, err := os.ReadFile(lockFile)
	require.NoError(t, err)
	assert.Contains(t, string(lock), "digest: "+digest)

	// -o json: the same result as one document, nothing on stderr.
	stdout, stderr, err = runCLI(t, "lock", dir, "--registry-config", dockerConfig, "-o", "json")
	require.NoError(t, err, stderr)
	assert.Empty(t, stderr)
	var report lockReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &report), stdout)
	assert.Equal(t, lockReport{File: lockFile, Images: []render.LockedImage{{Name: "app", Image: image, Digest: digest}}}, report)
	again, err := os.ReadFile(lockFile)
	require.NoError(t, err)
	assert.Equal(t, string(lock), string(again))

	rendered, stderr, err := runCLI(t, "render", dir, "--namespace", "apps")
	require.NoError(t, err, stderr)
	assert.Contains(t, rendered, "image: "+simple+"@"+digest, "the locked digest, not the tag")

	// The manifest moves to another tag: the lock is stale until locked again.
	manifest := filepath.Join(dir, "package", "manifest.yaml")
	data, err := os.ReadFile(manifest)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(manifest, []byte(strings.ReplaceAll(string(data), ":v1", ":v2")), 0o644))
	_, stderr, err = runCLI(t, "validate", dir)
	require.Error(t, err)
	assert.Contains(t, stderr, `stale: image "app" is `+simple+`:v2 in manifest.yaml but `+image+` in the lock file`)

	// A tag that does not exist: nothing is written.
	_, _, err = runCLI(t, "lock", dir, "--registry-config", dockerConfig)
	require.ErrorContains(t, err, `image "app"`)
	require.ErrorContains(t, err, "v2")
	after, err := os.ReadFile(lockFile)
	require.NoError(t, err)
	assert.Equal(t, string(lock), string(after), "a failed lock leaves the lock file alone")
}

func TestImageReference(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nginx:1.27":            "index.docker.io/library/nginx:1.27",
		"quay.io/example/app":   "quay.io/example/app:latest",
		"127.0.0.1:5000/a/b:v1": "127.0.0.1:5000/a/b:v1",
		"quay.io/x@sha256:" + strings.Repeat("a", 64): "quay.io/x@sha256:" + strings.Repeat("a", 64),
	} {
		ref, err := imageReference(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, ref.String(), in)
	}
	_, err := imageReference("UPPER/case:v1")
	assert.Error(t, err)
}
