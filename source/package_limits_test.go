package source

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// randomFile writes n bytes that gzip cannot compress to dir/name.
func randomFile(t *testing.T, dir, name string, n int) {
	t.Helper()
	data := make([]byte, n)
	_, err := rand.Read(data)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
}

// TestCheckLayerSizeNamesTheFiles: a package whose layer is over the compressed limit is
// refused by CheckLayerSize as by Build, naming the largest files, and the fix.
func TestCheckLayerSizeNamesTheFiles(t *testing.T) {
	t.Parallel()
	dir := testenv.PackageDir(t)
	randomFile(t, dir, "stray/big.bin", 64<<10)
	randomFile(t, dir, "stray/small.bin", 8<<10)
	limits := Limits{MaxCompressedBytes: 32 << 10}

	fsys, err := LoadDir(dir, limits)
	require.NoError(t, err, "the uncompressed limits hold")
	checkErr := CheckLayerSize(fsys, limits)
	_, buildErr := Build(dir, BuildOptions{Limits: limits})
	for _, err := range []error{checkErr, buildErr} {
		require.ErrorIs(t, err, ErrLimit)
		var le *LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, LimitCompressedBytes, le.Limit)
		assert.EqualValues(t, 32<<10, le.Max)
		require.NotEmpty(t, le.Files)
		assert.Equal(t, "stray/big.bin", le.Files[0].Path, "largest first")
		assert.EqualValues(t, 64<<10, le.Files[0].Size)
		assert.ErrorContains(t, err, "over 32768")
		assert.ErrorContains(t, err, "stray/big.bin (65536 bytes")
		assert.ErrorContains(t, err, "delete")
	}
	require.NoError(t, CheckLayerSize(fsys, Limits{}), "the default limit holds")
}

// TestLoadDirReportsEveryLimit: every bound LoadDir applies is reported at once, each naming
// the files responsible.
func TestLoadDirReportsEveryLimit(t *testing.T) {
	t.Parallel()
	dir := testenv.PackageDir(t)
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "etc")))
	testenv.WriteTree(t, dir, map[string]string{
		"deploy/a-very-long-name-indeed.yaml": "x",
		"big.yaml":                            strings.Repeat("x", 300),
	})
	_, err := LoadDir(dir, Limits{MaxUncompressedBytes: 200, MaxFiles: 5, MaxPathLength: 30})
	require.Error(t, err)
	var all interface{ Unwrap() []error }
	require.ErrorAs(t, err, &all)

	var notRegular *NotRegularError
	assert.ErrorAs(t, err, &notRegular)
	assert.ErrorContains(t, err, "etc is a symbolic link")
	byLimit := map[Limit]*LimitError{}
	for _, e := range all.Unwrap() {
		var le *LimitError
		if errors.As(e, &le) {
			byLimit[le.Limit] = le
		}
	}
	require.Contains(t, byLimit, LimitPathLength)
	assert.Equal(t, "deploy/a-very-long-name-indeed.yaml", byLimit[LimitPathLength].Files[0].Path)
	require.Contains(t, byLimit, LimitFiles)
	assert.ErrorContains(t, byLimit[LimitFiles], "more than 5 files")
	assert.EqualValues(t, 8, byLimit[LimitFiles].Got, "every entry counted")
	require.Contains(t, byLimit, LimitUncompressedBytes)
	assert.Equal(t, "big.yaml", byLimit[LimitUncompressedBytes].Files[0].Path)
	assert.ErrorContains(t, byLimit[LimitUncompressedBytes], "big.yaml (300 bytes)")
	assert.ErrorContains(t, byLimit[LimitUncompressedBytes], "the package is larger than 200 bytes")
}

// TestLayerBound: the bound that lets CheckLayerSize skip packing is above what packing writes,
// for data gzip cannot compress.
func TestLayerBound(t *testing.T) {
	t.Parallel()
	dir := testenv.PackageDir(t)
	randomFile(t, dir, "a/b.bin", 300<<10)
	randomFile(t, dir, strings.Repeat("n", 200)+"/c.bin", 1)
	fsys, err := LoadDir(dir, Limits{})
	require.NoError(t, err)
	layer, err := packLayer(fsys, DefaultLimits())
	require.NoError(t, err)
	bound, err := layerBound(fsys)
	require.NoError(t, err)
	assert.Greater(t, bound, int64(len(layer)))
	require.Error(t, CheckLayerSize(fsys, Limits{MaxCompressedBytes: int64(len(layer)) - 1}), "packed when the bound is over the limit")
	require.NoError(t, CheckLayerSize(fsys, Limits{MaxCompressedBytes: int64(len(layer))}))
}
