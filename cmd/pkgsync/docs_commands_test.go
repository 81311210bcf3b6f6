package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/docs"
)

// TestDocsShowOnlyCommandsAndFlagsThatExist (issue 45): every pkgsync command line in a code
// block of the README, docs/ and the examples' READMEs names a command that exists and flags
// it takes, parsed by the CLI's own flag sets. TestExampleREADMECommands runs those that need
// neither a cluster nor a registry; test/e2e's TestDocsCommands runs those that need one.
func TestDocsShowOnlyCommandsAndFlagsThatExist(t *testing.T) {
	t.Parallel()
	commands, err := docs.All(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(commands), 30, "pkgsync command lines in the docs")
	for _, c := range commands {
		root := newRootCmd()
		cmd, rest, err := root.Find(c.Args)
		if !assert.NoError(t, err, "%s: %s", c.Where, c) {
			continue
		}
		if !assert.NotEqual(t, root, cmd, "%s: %s names no command", c.Where, c) {
			continue
		}
		assert.NoError(t, cmd.ParseFlags(rest), "%s: %s", c.Where, strings.Join(c.Args, " "))
	}
}
