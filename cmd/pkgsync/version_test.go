package main

import (
	"encoding/json"
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
