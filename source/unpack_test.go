package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tarEntry is one hand-made archive entry.
type tarEntry struct {
	name     string
	typeflag byte
	body     string
	linkname string
}

func file(name, body string) tarEntry { return tarEntry{name: name, typeflag: tar.TypeReg, body: body} }

// makeTar writes entries as they are, with no cleaning, so tests can craft hostile archives.
func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Linkname: e.linkname, Mode: 0o644}
		if e.typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if e.body != "" {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestUnpackAccepts(t *testing.T) {
	t.Parallel()
	u := newUnpacker(Limits{})
	layer := gzipBytes(t, makeTar(t,
		tarEntry{name: "./", typeflag: tar.TypeDir},
		file("./manifest.yaml", "kind: PackageManifest\n"),
		tarEntry{name: "deploy/", typeflag: tar.TypeDir},
		file("deploy/a.yaml", "a"),
		file("deploy/a.yaml", "replaced"),
	))
	require.NoError(t, u.unpack(bytes.NewReader(layer), true))

	data, err := fs.ReadFile(u.files, "deploy/a.yaml")
	require.NoError(t, err)
	assert.Equal(t, "replaced", string(data), "a later entry replaces an earlier one")
	info, err := fs.Stat(u.files, "deploy")
	require.NoError(t, err)
	assert.True(t, info.IsDir())
	data, err = fs.ReadFile(u.files, "manifest.yaml")
	require.NoError(t, err)
	assert.Equal(t, "kind: PackageManifest\n", string(data))
}

func TestUnpackRejects(t *testing.T) {
	t.Parallel()
	small := Limits{MaxUncompressedBytes: 10, MaxFiles: 3, MaxPathLength: 20}
	tests := []struct {
		name    string
		entries []tarEntry
		limits  Limits
		plain   bool // layer is not gzipped
		want    error
		wantMsg string
	}{
		{name: "absolute path", entries: []tarEntry{file("/etc/passwd", "x")}, want: ErrUnsafeEntry, wantMsg: "absolute path"},
		{name: "dot-dot", entries: []tarEntry{file("a/../../evil", "x")}, want: ErrUnsafeEntry, wantMsg: "climbs out"},
		{name: "leading dot-dot", entries: []tarEntry{file("../evil", "x")}, want: ErrUnsafeEntry, wantMsg: "climbs out"},
		{name: "symlink", entries: []tarEntry{{name: "link", typeflag: tar.TypeSymlink, linkname: "/etc/passwd"}}, want: ErrUnsafeEntry, wantMsg: "symbolic link"},
		{name: "hard link", entries: []tarEntry{file("a", "x"), {name: "b", typeflag: tar.TypeLink, linkname: "a"}}, want: ErrUnsafeEntry, wantMsg: "hard link"},
		{name: "char device", entries: []tarEntry{{name: "null", typeflag: tar.TypeChar}}, want: ErrUnsafeEntry, wantMsg: "device"},
		{name: "block device", entries: []tarEntry{{name: "sda", typeflag: tar.TypeBlock}}, want: ErrUnsafeEntry, wantMsg: "device"},
		{name: "fifo", entries: []tarEntry{{name: "pipe", typeflag: tar.TypeFifo}}, want: ErrUnsafeEntry, wantMsg: "FIFO"},
		{name: "whiteout", entries: []tarEntry{file("dir/.wh.gone", "")}, want: ErrUnsafeEntry, wantMsg: "whiteout"},
		{name: "file under file", entries: []tarEntry{file("a", "x"), file("a/b", "y")}, want: ErrUnsafeEntry, wantMsg: "which is a file"},
		{name: "file over directory", entries: []tarEntry{file("a/b", "x"), file("a", "y")}, want: ErrUnsafeEntry, wantMsg: "replaces a directory"},
		{name: "too many files", limits: small, entries: []tarEntry{file("a", ""), file("b", ""), file("c", ""), file("d", "")}, want: ErrLimit, wantMsg: "more than 3 files"},
		{name: "too large", limits: small, entries: []tarEntry{file("a", "123456"), file("b", "123456")}, want: ErrLimit, wantMsg: "larger than 10 bytes"},
		{name: "path too long", limits: small, entries: []tarEntry{file(strings.Repeat("x", 21), "")}, want: ErrLimit, wantMsg: "longer than 20 bytes"},
		{name: "plain tar symlink", plain: true, entries: []tarEntry{{name: "link", typeflag: tar.TypeSymlink, linkname: "x"}}, want: ErrUnsafeEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			layer := makeTar(t, tt.entries...)
			if !tt.plain {
				layer = gzipBytes(t, layer)
			}
			err := newUnpacker(tt.limits).unpack(bytes.NewReader(layer), !tt.plain)
			require.ErrorIs(t, err, tt.want)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
}

func TestUnpackBoundsDecompressedStream(t *testing.T) {
	t.Parallel()
	// Thousands of empty directories carry no file bytes, but their headers inflate the stream:
	// the decompressed stream has its own bound besides the sum of file sizes.
	entries := make([]tarEntry, 4000)
	for i := range entries {
		entries[i] = tarEntry{name: fmt.Sprintf("d%d/", i), typeflag: tar.TypeDir}
	}
	limits := Limits{MaxUncompressedBytes: 1, MaxFiles: 1 << 20}
	err := newUnpacker(limits).unpack(bytes.NewReader(gzipBytes(t, makeTar(t, entries...))), true)
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, "decompresses to more than")
}

func TestUnpackRejectsNonGzip(t *testing.T) {
	t.Parallel()
	err := newUnpacker(Limits{}).unpack(bytes.NewReader(makeTar(t, file("a", "x"))), true)
	require.ErrorContains(t, err, "not gzip-compressed")
}

// FuzzUnpack feeds arbitrary bytes to the unpacker, plain and gzipped. Whatever it accepts must
// respect the limits and hold only valid, relative paths.
func FuzzUnpack(f *testing.F) {
	f.Add(makeTar(f, file("manifest.yaml", "kind: PackageManifest"), tarEntry{name: "dir/", typeflag: tar.TypeDir}, file("dir/a.yaml", "a: 1")))
	f.Add(makeTar(f, file("../escape", "x")))
	f.Add(makeTar(f, tarEntry{name: "link", typeflag: tar.TypeSymlink, linkname: "/etc"}))
	f.Add(makeTar(f, file("a", "x"), file("a/b", "y")))
	f.Add(gzipBytes(f, makeTar(f, file("package/manifest.yaml", "x"))))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		limits := Limits{MaxUncompressedBytes: 1 << 16, MaxFiles: 64, MaxPathLength: 128}
		for _, gzipped := range []bool{false, true} {
			u := newUnpacker(limits)
			if err := u.unpack(bytes.NewReader(data), gzipped); err != nil {
				continue
			}
			require.LessOrEqual(t, len(u.files), limits.MaxFiles)
			var total int64
			for name, f := range u.files {
				require.True(t, fs.ValidPath(name), "invalid path %q", name)
				require.NotContains(t, strings.Split(name, "/"), "..")
				require.LessOrEqual(t, len(name), limits.MaxPathLength)
				total += int64(len(f.Data))
			}
			require.LessOrEqual(t, total, limits.MaxUncompressedBytes)
			require.NoError(t, fs.WalkDir(u.files, ".", func(string, fs.DirEntry, error) error { return nil }))
		}
	})
}
