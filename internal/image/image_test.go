package image

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
)

// created is the commit time the tests build with.
var created = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// fakeBinaries writes a small stand-in executable per platform: the assembly is what these
// tests check; cmd/pkgsync's image test builds and runs the real binary.
func fakeBinaries(t *testing.T, content string) []Binary {
	t.Helper()
	var out []Binary
	for _, arch := range []string{"amd64", "arm64"} {
		path := filepath.Join(t.TempDir(), "pkgsync")
		require.NoError(t, os.WriteFile(path, []byte(content+" for "+arch), 0o755))
		out = append(out, Binary{OS: "linux", Arch: arch, Path: path})
	}
	return out
}

func testOptions(t *testing.T) Options {
	return Options{
		Binaries: fakeBinaries(t, "#!pkgsync"),
		Version:  "v1.2.3", Revision: "0123456789abcdef", Source: "https://github.com/pkgsync/pkgsync",
		Created: created,
	}
}

func digestOf(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	require.NoError(t, err)
	return d
}

func TestBuildIsReproducible(t *testing.T) {
	t.Parallel()
	first, err := Build(testOptions(t))
	require.NoError(t, err)
	// Other files with the same content, at other paths, at another time of day.
	second, err := Build(testOptions(t))
	require.NoError(t, err)
	assert.Equal(t, digestOf(t, first), digestOf(t, second), "the same inputs give the same index digest")

	var a, b bytes.Buffer
	require.NoError(t, WriteLayout(&a, first, "v1.2.3"))
	require.NoError(t, WriteLayout(&b, second, "v1.2.3"))
	assert.Equal(t, a.Bytes(), b.Bytes(), "the same index gives the same layout archive, byte for byte")

	t.Run("every input counts", func(t *testing.T) {
		t.Parallel()
		for name, change := range map[string]func(*Options){
			"commit time": func(o *Options) { o.Created = o.Created.Add(time.Second) },
			"revision":    func(o *Options) { o.Revision = "fedcba9876543210" },
			"version":     func(o *Options) { o.Version = "v1.2.4" },
			"binary":      func(o *Options) { o.Binaries = fakeBinaries(t, "#!other") },
		} {
			opts := testOptions(t)
			change(&opts)
			idx, err := Build(opts)
			require.NoError(t, err)
			assert.NotEqual(t, digestOf(t, first), digestOf(t, idx), name)
		}
	})
}

// entry is a file of an image's file system, as its layers hold it.
type entry struct {
	hdr  *tar.Header
	data []byte
}

func layerEntries(t *testing.T, l v1.Layer) []entry {
	t.Helper()
	mt, err := l.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCILayer, mt)
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	var out []entry
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out = append(out, entry{hdr, data})
	}
}

func TestBuildContents(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	idx, err := Build(opts)
	require.NoError(t, err)

	manifest, err := idx.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, manifest.MediaType)
	assert.Equal(t, opts.Labels(), manifest.Annotations)
	require.Len(t, manifest.Manifests, 2)

	var baseDigests []v1.Hash
	for i, desc := range manifest.Manifests {
		arch := opts.Binaries[i].Arch
		t.Run(arch, func(t *testing.T) {
			assert.Equal(t, &v1.Platform{OS: "linux", Architecture: arch}, desc.Platform)
			assert.Equal(t, types.OCIManifestSchema1, desc.MediaType)
			img, err := idx.Image(desc.Digest)
			require.NoError(t, err)
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, arch, cfg.Architecture)
			assert.Equal(t, "linux", cfg.OS)
			assert.Equal(t, "65532", cfg.Config.User)
			assert.Equal(t, []string{"/pkgsync"}, cfg.Config.Entrypoint)
			assert.Empty(t, cfg.Config.Cmd)
			assert.Equal(t, map[string]string{
				"org.opencontainers.image.title":    "pkgsync",
				"org.opencontainers.image.source":   "https://github.com/pkgsync/pkgsync",
				"org.opencontainers.image.revision": "0123456789abcdef",
				"org.opencontainers.image.version":  "v1.2.3",
				"org.opencontainers.image.created":  "2024-05-06T07:08:09Z",
			}, cfg.Config.Labels)
			assert.True(t, cfg.Created.Equal(created), "created is the commit time: %s", cfg.Created)
			assert.Len(t, cfg.History, 2)

			layers, err := img.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 2)
			d, err := layers[0].Digest()
			require.NoError(t, err)
			baseDigests = append(baseDigests, d)

			base := layerEntries(t, layers[0])
			files := map[string]entry{}
			for _, e := range base {
				files[e.hdr.Name] = e
				assert.True(t, e.hdr.ModTime.Equal(time.Unix(0, 0)), "%s: base layer times are the epoch, got %s", e.hdr.Name, e.hdr.ModTime)
				assert.Empty(t, e.hdr.Uname+e.hdr.Gname, "%s: numeric owners only", e.hdr.Name)
			}
			assert.Contains(t, string(files["etc/passwd"].data), "nonroot:x:65532:65532:")
			assert.Contains(t, string(files["etc/group"].data), "nonroot:x:65532:")
			assert.Equal(t, int64(0o1777), files["tmp/"].hdr.Mode)
			assert.Equal(t, 65532, files["home/nonroot/"].hdr.Uid)
			pool := x509.NewCertPool()
			assert.True(t, pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"].data))

			app := layerEntries(t, layers[1])
			require.Len(t, app, 1, "the binary layer holds only the binary")
			assert.Equal(t, "pkgsync", app[0].hdr.Name)
			assert.Equal(t, int64(0o755), app[0].hdr.Mode)
			assert.Equal(t, 0, app[0].hdr.Uid, "root owns the binary; the user cannot replace it")
			assert.True(t, app[0].hdr.ModTime.Equal(created))
			assert.Equal(t, "#!pkgsync for "+arch, string(app[0].data))
		})
	}
	require.Len(t, baseDigests, 2)
	assert.Equal(t, baseDigests[0], baseDigests[1], "one base layer for every platform")
}

func TestCABundle(t *testing.T) {
	t.Parallel()
	bundle := CABundle()
	n := 0
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			assert.Empty(t, bytes.TrimSpace(rest), "nothing but certificates")
			break
		}
		_, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		n++
	}
	assert.Greater(t, n, 100, "the Mozilla root program has well over 100 roots")
	assert.Equal(t, bundle, CABundle(), "the bundle is the same on every call")
}

func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"no binaries", func(o *Options) { o.Binaries = nil }, "no binaries"},
		{"no commit time", func(o *Options) { o.Created = time.Time{} }, "SOURCE_DATE_EPOCH"},
		{"a platform twice", func(o *Options) { o.Binaries[1].Arch = "amd64" }, "linux/amd64 given twice"},
		{"a missing binary", func(o *Options) { o.Binaries[0].Path = filepath.Join(t.TempDir(), "missing") }, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := testOptions(t)
			tt.change(&opts)
			_, err := Build(opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestWriteLayoutLoads checks that the archive is a layout the rest of pkgsync reads: pkgsync
// push loads it with source.LoadLayout (oras-go), an implementation independent of the writer.
func TestWriteLayoutLoads(t *testing.T) {
	t.Parallel()
	idx, err := Build(testOptions(t))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(file)
	require.NoError(t, err)
	require.NoError(t, WriteLayout(f, idx, "v1.2.3"))
	require.NoError(t, f.Close())

	img, err := source.LoadLayout(t.Context(), file)
	require.NoError(t, err)
	assert.Equal(t, digestOf(t, idx).String(), img.Digest)
	assert.Equal(t, "v1.2.3", img.Version)
}
