package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

func TestRenderRegistryReference(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	// An empty Docker config: the test must not depend on the machine's credentials.
	dockerConfig := filepath.Join(t.TempDir(), "config.json")
	const dir = "../../packages-example/simple"
	simple := reg.Host + "/" + testenv.Repository(t, "simple")
	ref := simple + ":v1"

	out, err := runPkgsync(t, "build", dir, "--tag", ref, "--push", "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)
	digest := strings.TrimSpace(out)

	fromDir, _, err := runCLI(t, "render", dir, "--namespace", "apps")
	require.NoError(t, err)
	require.Contains(t, fromDir, "kind: Deployment")
	for _, r := range []string{ref, simple + "@" + digest} {
		t.Run(r, func(t *testing.T) {
			fromRef, stderr, err := runCLI(t, "render", r, "--namespace", "apps", "--registry-config", dockerConfig)
			require.NoError(t, err, stderr)
			assert.Equal(t, fromDir, fromRef)

			out, _, err := runCLI(t, "validate", r, "--registry-config", dockerConfig)
			require.NoError(t, err)
			assert.Equal(t, r+": valid\n", out)
		})
	}

	_, _, err = runCLI(t, "render", simple+":missing", "--registry-config", dockerConfig)
	require.ErrorContains(t, err, "tag missing not found in "+simple)
}
