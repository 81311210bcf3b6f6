package source

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// BenchmarkUnpack unpacks a package layer in memory, as every pull of a new digest does: gzip,
// tar, the path checks and limits.
func BenchmarkUnpack(b *testing.B) {
	for _, files := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			dir := b.TempDir()
			tree := map[string]string{"manifest.yaml": testenv.PackageManifest}
			for i := range files - 1 {
				tree[fmt.Sprintf("deploy/object-%04d.yaml", i)] = fmt.Sprintf(
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: object-%d\ndata:\n  payload: %q\n", i, strings.Repeat("x", 1024))
			}
			testenv.WriteTree(b, dir, tree)
			layer, err := packLayer(os.DirFS(dir), DefaultLimits())
			require.NoError(b, err)
			var size int64
			for _, body := range tree {
				size += int64(len(body))
			}
			// Throughput in package bytes, not in the (highly compressed) layer bytes.
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				u := newUnpacker(DefaultLimits())
				if err := u.unpack(bytes.NewReader(layer), true); err != nil {
					b.Fatal(err)
				}
				if len(u.files) < files {
					b.Fatalf("unpacked %d files, want %d", len(u.files), files)
				}
			}
		})
	}
}

// BenchmarkPack builds the reproducible layer of a package directory, as `pkgsync build` does.
func BenchmarkPack(b *testing.B) {
	dir := testenv.PackageDir(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := packLayer(os.DirFS(dir), DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
}
