package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A wrong command line exits 2, for every command; a failure of what was asked exits 1.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	invalid := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(invalid, "manifest.yaml"), []byte("apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\n"), 0o600))
	tests := []struct {
		args []string
		want int
	}{
		{nil, 0},
		{[]string{"--help"}, 0},
		{[]string{"fleet"}, 0},
		{[]string{"key"}, 0},
		{[]string{"version"}, 0},
		{[]string{"render", "../../packages-example/simple"}, 0},
		{[]string{"validate", "../../packages-example/simple"}, 0},

		{[]string{"bogus"}, 2},
		{[]string{"rendr"}, 2}, // cobra suggests render
		{[]string{"fleet", "bogus"}, 2},
		{[]string{"key", "bogus"}, 2},
		{[]string{"--bogus"}, 2},
		{[]string{"validate"}, 2},
		{[]string{"validate", "a", "b"}, 2},
		{[]string{"validate", "--bogus", "../../packages-example/simple"}, 2},
		{[]string{"render"}, 2},
		{[]string{"render", "a", "b"}, 2},
		{[]string{"render", "--bogus", "../../packages-example/simple"}, 2},
		{[]string{"apply"}, 2},
		{[]string{"apply", "a", "b"}, 2},
		{[]string{"apply", "--bogus", "a"}, 2},
		{[]string{"diff"}, 2},
		{[]string{"version", "extra"}, 2},
		{[]string{"controller", "extra"}, 2},
		{[]string{"fleet", "status"}, 2},

		{[]string{"validate", invalid}, 1},
		{[]string{"render", invalid}, 1},
		{[]string{"apply", "../../packages-example/simple", "--kubeconfig", missing}, 1},
		{[]string{"fleet", "status", "x", "--kubeconfig", missing}, 1},

		// Commands that compare: 1 is "differences found" (diff) or "a member would fail"
		// (fleet plan), so "could not run" is 3.
		{[]string{"fleet", "plan"}, 2},
		{[]string{"fleet", "plan", "x", "-o", "bogus"}, 2},
		{[]string{"fleet", "plan", "x", "--kubeconfig", missing}, diffExitError},
		{[]string{"diff", "../../packages-example/simple", "--kubeconfig", missing}, diffExitError},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		got := run(tt.args, &stdout, &stderr)
		assert.Equal(t, tt.want, got, "pkgsync %s\nstderr: %s", strings.Join(tt.args, " "), stderr.String())
	}
}

// Every command refuses an unknown flag, and every command that takes a fixed number of
// arguments refuses too many, with exit code 2.
func TestUsageExitCodeEveryCommand(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Name() == "help" || c.Name() == "__complete" || c.Name() == "__completeNoDesc" {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		args := append(append([]string{}, path...), "--no-such-flag")
		assert.Equal(t, 2, run(args, &bytes.Buffer{}, &bytes.Buffer{}), "pkgsync %s", strings.Join(args, " "))
		if c.Name() == "convert" { // convert [FILE...] takes any number
			return
		}
		args = append(append([]string{}, path...), "one", "two", "three", "four", "five")
		assert.Equal(t, 2, run(args, &bytes.Buffer{}, &bytes.Buffer{}), "pkgsync %s", strings.Join(args, " "))
	}
	walk(newRootCmd())
}
