package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBinaryLinksNoReleaseTooling: the image builder (internal/image, used by
// hack/release-image) is not part of the pkgsync binary.
func TestBinaryLinksNoReleaseTooling(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "pkgsync.dev/pkgsync/cmd/pkgsync").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	assert.Contains(t, deps, "pkgsync.dev/pkgsync/internal/intoto", "the statements pkgsync sign signs")
	assert.NotContains(t, deps, "pkgsync.dev/pkgsync/internal/image")
}
