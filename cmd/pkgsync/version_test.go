package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/internal/version"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	stdout, _, err := runCLI(t, "version")
	require.NoError(t, err)
	assert.Contains(t, stdout, "version:  "+version.Version+"\n")
	assert.Contains(t, stdout, "image:    "+version.Image()+"\n")
	assert.Contains(t, stdout, "commit:   ")

	stdout, _, err = runCLI(t, "version", "-o", "json")
	require.NoError(t, err)
	var info versionInfo
	require.NoError(t, json.Unmarshal([]byte(stdout), &info))
	assert.Equal(t, version.Version, info.Version)
	assert.Equal(t, version.Image(), info.Image)
}

// A binary without a revision says why, and how to build one with it; -o json keeps the value.
func TestVersionUnknownCommit(t *testing.T) {
	t.Parallel()
	info := currentVersion()
	info.Commit = version.Unknown
	assert.Contains(t, info.text(), "commit:   unknown (this binary records none: make build stamps it;")
	// Why, as internal/version's TestRevisionOfAPlainGoBuild finds it.
	assert.Contains(t, info.text(), "not in a linked git worktree (golang/go#58218), not with -buildvcs=false (see go env GOFLAGS)")
	info.Commit = "62ee744"
	assert.Contains(t, info.text(), "commit:   62ee744\n")
}

// pkgsync --version prints what pkgsync version prints, on stdout, exit 0.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	var want, stdout, stderr bytes.Buffer
	require.Zero(t, run([]string{"version"}, &want, io.Discard))
	require.Zero(t, run([]string{"--version"}, &stdout, &stderr), stderr.String())
	assert.Equal(t, want.String(), stdout.String())
	assert.Empty(t, stderr.String())
	assert.Contains(t, stdout.String(), "version:  "+version.Version+"\n")
	// The flag is the root's: build's --version is the package's version.
	assert.NotNil(t, newRootCmd().Flags().Lookup("version"))
	assert.Nil(t, newRootCmd().Flags().ShorthandLookup("v"), "no -v: kubectl's -v is the log level")
}
