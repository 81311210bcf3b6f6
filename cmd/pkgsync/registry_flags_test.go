package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
)

func TestProgressPrinter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := newProgressPrinter(&buf)

	p.show(source.Progress{Digest: "sha256:small", Size: progressThreshold - 1, Done: 10})
	assert.Empty(t, buf.String(), "small blobs stay quiet")

	const size = 1 << 20
	for _, done := range []int64{1, 2, size / 2, size/2 + 1, size} {
		p.show(source.Progress{Digest: "sha256:0123456789abcdef0123", Size: size, Done: done})
	}
	lines := strings.Split(buf.String(), "\r")[1:]
	assert.Len(t, lines, 3, "one update per whole percent: %q", buf.String())
	assert.Contains(t, lines[0], "sha256:0123456789ab")
	assert.True(t, strings.HasSuffix(lines[2], "100%\n"), "a finished blob ends its line: %q", lines[2])
}

// emptyDockerConfig writes a Docker config without credentials, so that a test depends neither
// on the machine's credentials nor on a missing --registry-config file being taken for none.
func emptyDockerConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte("{}\n"), 0o600))
	return path
}

// A --registry-config file that does not exist is an error naming it, before anything is sent:
// not an anonymous push or pull.
func TestMissingRegistryConfig(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "typo.json")
	pkg := writeDiffPackage(t)
	for _, args := range [][]string{
		{"push", pkg, "127.0.0.1:1/team/pkg:v1"},
		{"pull", "127.0.0.1:1/team/pkg:v1", "--into", filepath.Join(t.TempDir(), "out")},
		{"build", pkg, "--tag", "127.0.0.1:1/team/pkg:v1", "--push"},
	} {
		_, _, err := runCLI(t, append(args, "--registry-config", missing)...)
		require.Error(t, err, "%q", args)
		assert.ErrorContains(t, err, "--registry-config "+missing+": no such file", "%q", args)
		assert.NotContains(t, err.Error(), "127.0.0.1:1", "%q: nothing sent", args)
	}
	_, _, err := runCLI(t, "push", pkg, "127.0.0.1:1/team/pkg:v1", "--registry-config", emptyDockerConfig(t))
	assert.ErrorContains(t, err, "127.0.0.1:1", "an empty config is no credentials")
}
