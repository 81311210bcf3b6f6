package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// validPackageDir is a package that validates, with a ConfigMap in namespace ns ("" for none).
func validPackageDir(t *testing.T, ns string) string {
	t.Helper()
	dir := t.TempDir()
	meta := "  name: settings\n"
	if ns != "" {
		meta += "  namespace: " + ns + "\n"
	}
	testenv.WriteTree(t, dir, map[string]string{
		"manifest.yaml":  testenv.PackageManifest,
		"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n" + meta + "  annotations:\n    pkgsync.dev/phase: deploy\ndata:\n  a: b\n",
	})
	return dir
}

// A stray file that makes the layer larger than a build packs is refused by validate and
// render as by build, each naming the file, its size and the limit.
func TestValidateAppliesBuildsCompressedLimit(t *testing.T) {
	t.Parallel()
	dir := validPackageDir(t, "")
	stray := make([]byte, source.DefaultLimits().MaxCompressedBytes+1<<20)
	_, err := rand.Read(stray)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray.bin"), stray, 0o600))
	want := "stray.bin (" + strconv.Itoa(len(stray)) + " bytes"

	// One run: the race detector makes gzip of the 33 MiB slow. Build and the other limits are
	// tested in source (TestCheckLayerSizeNamesTheFiles), render's reading in
	// TestValidateReportsEveryLimit.
	out, _, err := runCLI(t, "validate", dir, "-o", "json")
	assert.Equal(t, 1, exitCodeOf(err))
	var res validateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.Problems, 1)
	assert.Equal(t, "stray.bin", res.Problems[0].File)
	assert.Contains(t, res.Problems[0].Message, want)
	assert.Contains(t, res.Problems[0].Message, "compressed, over 33554432")
}

// Every limit is reported in one run, each problem naming its file.
func TestValidateReportsEveryLimit(t *testing.T) {
	t.Parallel()
	dir := validPackageDir(t, "")
	long := filepath.Join(strings.Repeat("d", 200), strings.Repeat("e", 200), strings.Repeat("f", 200),
		strings.Repeat("g", 200), strings.Repeat("h", 200), strings.Repeat("i", 200))
	testenv.WriteTree(t, dir, map[string]string{filepath.Join(long, "x.yaml"): "a: b\n"})
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.yaml")))

	out, _, err := runCLI(t, "validate", dir, "-o", "json")
	assert.Equal(t, 1, exitCodeOf(err))
	var res validateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	files := map[string]string{}
	for _, p := range res.Problems {
		files[p.File] = p.Message
	}
	assert.Contains(t, files["passwd.yaml"], "passwd.yaml is a symbolic link")
	assert.Contains(t, files[filepath.ToSlash(long)], "is longer than 1024 bytes")
	assert.Len(t, res.Problems, 2, "the long directory is named once: %v", files)

	_, _, err = runCLI(t, "render", dir)
	assert.ErrorContains(t, err, "passwd.yaml is a symbolic link")
	assert.ErrorContains(t, err, "is longer than 1024 bytes", "render refuses every limit too")
}
