package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/test/testenv"
)

// TestOverridesInTheCLI: pull, lock and render read through --registry-host-overrides and
// --image-prefix-overrides, from a registry the references do not name; the lock file keeps the
// images as the manifest names them, and .images are relocated as templates see them.
func TestOverridesInTheCLI(t *testing.T) {
	t.Parallel()
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{})
	dockerConfig := emptyDockerConfig(t)
	out, err := runPkgsync(t, "build", "../../packages-example/simple", "--tag", mirror.Host+"/mirrored/team/simple:v1",
		"--push", "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)
	digest := strings.TrimSpace(out)

	// quay.example does not resolve: every read goes to the mirror.
	image := "quay.example/team/simple:v1"
	for name, flags := range map[string][]string{
		"host":   {"--registry-host-overrides", "quay.example=" + mirror.Host + ",other.example=elsewhere.example", "--image-prefix-overrides", "quay.example/team/=quay.example/mirrored/team/"},
		"prefix": {"--image-prefix-overrides", "quay.example/=" + mirror.Host + "/mirrored/"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dest := filepath.Join(t.TempDir(), "pulled")
			stdout, stderr, err := runCLI(t, append([]string{"pull", image, "--output", dest, "--output-format", "digest", "--registry-config", dockerConfig}, flags...)...)
			require.NoError(t, err, stderr)
			assert.Equal(t, digest+"\n", stdout)

			dir := writePKOPackage(t, image)
			_, stderr, err = runCLI(t, append([]string{"lock", dir, "--registry-config", dockerConfig}, flags...)...)
			require.NoError(t, err, stderr)
			lock, err := os.ReadFile(filepath.Join(dir, "package", render.LockFile))
			require.NoError(t, err)
			assert.Contains(t, string(lock), "image: "+image)
			assert.Contains(t, string(lock), "digest: "+digest)

			rendered, stderr, err := runCLI(t, append([]string{"render", dir, "--namespace", "apps"}, flags...)...)
			require.NoError(t, err, stderr)
			assert.Contains(t, rendered, "image: "+mirror.Host+"/mirrored/team/simple@"+digest, "the .images relocated")

			rendered, stderr, err = runCLI(t, append([]string{"render", image, "--namespace", "apps", "--registry-config", dockerConfig}, flags...)...)
			require.NoError(t, err, stderr)
			assert.Contains(t, rendered, "kind: ")
		})
	}

	_, _, err = runCLI(t, "pull", image, "--output", t.TempDir(), "--registry-host-overrides", "quay.example")
	require.ErrorContains(t, err, "--registry-host-overrides")
}
