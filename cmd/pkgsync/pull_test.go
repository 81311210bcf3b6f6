package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed pull removes the directories it created for --into, and empties an existing empty
// --into again, but never removes a directory that was there before.
func TestFailedPullLeavesNoDirectory(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	created := filepath.Join(parent, "new", "package")
	existing := filepath.Join(parent, "existing")
	require.NoError(t, os.Mkdir(existing, 0o755))
	for _, into := range []string{created, existing} {
		_, _, err := runCLI(t, "pull", "127.0.0.1:1/team/pkg:v1", "--into", into, "--registry-config", emptyDockerConfig(t))
		require.ErrorContains(t, err, "127.0.0.1:1")
	}
	_, err := os.Stat(filepath.Join(parent, "new"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the directories pull created are gone")
	entries, err := os.ReadDir(existing)
	require.NoError(t, err, "the user's directory stays")
	assert.Empty(t, entries)

	// A directory that is not empty is refused and left as it was.
	full := filepath.Join(parent, "full")
	require.NoError(t, os.MkdirAll(full, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o600))
	_, _, err = runCLI(t, "pull", "127.0.0.1:1/team/pkg:v1", "--into", full, "--registry-config", emptyDockerConfig(t))
	require.ErrorContains(t, err, "is not empty")
	assert.FileExists(t, filepath.Join(full, "keep"))
}
