package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/source"
)

// runTool runs release-image with args and returns its stdout, stderr and exit code.
func runTool(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// TestReleaseImage builds the controller image as make image does (both platforms, the real
// binary cross-compiled from this repository), twice, in two checkouts: the same digest and
// archive byte for byte. It reads the archive with go-containerregistry (not the code that
// wrote it), checks what a container runtime reads and the SBOM and provenance attached, loads
// it as pkgsync push does, and runs the binary of this machine's platform from the image.
func TestReleaseImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Two copies of the module at different paths, taken at once: the builds see the same
	// source even while someone edits the working tree, and must not depend on where it is.
	checkouts := []string{filepath.Join(dir, "checkout-a"), filepath.Join(dir, "elsewhere", "checkout-b")}
	for _, c := range checkouts {
		copyModule(t, "../..", c)
	}
	const ref = "registry.example.com/pkgsync/controller:v1.2.3-test"
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	args := []string{"--platform", "linux/amd64,linux/arm64", "--version", "v1.2.3-test",
		"--revision", "0123456789abcdef0123456789abcdef01234567", "--created", created.Format(time.RFC3339), "--output-format", "digest", "--tag", ref}
	outputs := func(name string) []string {
		return []string{"--sbom", filepath.Join(dir, name+".spdx.json"), "--provenance", filepath.Join(dir, name+".intoto.json"),
			"--archive", filepath.Join(dir, name+".tar")}
	}
	stdout, stderr, code := runTool(t, append(append(args, outputs("first")...), "--dir", checkouts[0])...)
	require.Equal(t, 0, code, stderr)
	digest := strings.TrimSpace(stdout)
	require.True(t, strings.HasPrefix(digest, "sha256:"), stdout)
	first := filepath.Join(dir, "first.tar")

	t.Run("the same commit gives the same digest", func(t *testing.T) {
		stdout, stderr, code := runTool(t, append(append(args, outputs("second")...), "--dir", checkouts[1])...)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, digest, strings.TrimSpace(stdout), "binaries rebuilt in another checkout, image assembled again: the same index digest")
		for _, ext := range []string{".tar", ".spdx.json", ".intoto.json"} {
			assert.Equal(t, fileSHA256(t, filepath.Join(dir, "first"+ext)), fileSHA256(t, filepath.Join(dir, "second"+ext)), "the same %s, byte for byte", ext)
		}
	})

	lay := extractLayout(t, first)
	top, err := lay.ImageIndex()
	require.NoError(t, err)
	topManifest, err := top.IndexManifest()
	require.NoError(t, err)

	t.Run("the SBOM and provenance are attached", func(t *testing.T) {
		sbom, err := os.ReadFile(filepath.Join(dir, "first.spdx.json"))
		require.NoError(t, err)
		var doc struct {
			Packages []struct {
				Name    string `json:"name"`
				Version string `json:"versionInfo"`
			} `json:"packages"`
		}
		require.NoError(t, json.Unmarshal(sbom, &doc))
		modules := map[string]string{}
		for _, p := range doc.Packages {
			modules[p.Name] = p.Version
		}
		assert.Equal(t, "v1.2.3-test", modules["pkgsync.dev/pkgsync"])
		assert.NotEmpty(t, modules["oras.land/oras-go/v2"], "every module linked in is listed")
		assert.NotEmpty(t, modules["sigs.k8s.io/controller-runtime"])

		var stmt struct {
			Subject []struct {
				Name   string            `json:"name"`
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
			PredicateType string `json:"predicateType"`
		}
		prov, err := os.ReadFile(filepath.Join(dir, "first.intoto.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(prov, &stmt))
		assert.Equal(t, "https://slsa.dev/provenance/v1", stmt.PredicateType)
		require.Len(t, stmt.Subject, 1)
		assert.Equal(t, "registry.example.com/pkgsync/controller", stmt.Subject[0].Name)
		assert.Equal(t, strings.TrimPrefix(digest, "sha256:"), stmt.Subject[0].Digest["sha256"])

		var types, refNames []string
		for _, d := range topManifest.Manifests {
			if d.ArtifactType != "" {
				types = append(types, d.ArtifactType)
			}
			refNames = append(refNames, d.Annotations[ocispec.AnnotationRefName])
		}
		assert.ElementsMatch(t, []string{"application/spdx+json", "application/vnd.in-toto+json"}, types, "the referrers")
		assert.Contains(t, refNames, "v1.2.3-test", "the image, under its tag")
		assert.Contains(t, refNames, strings.Replace(digest, ":", "-", 1)+".sbom", "cosign's .sbom tag holds the SBOM")

		// pkgsync push reads the archive as the image, and its attachments beside it.
		img, err := source.LoadLayout(t.Context(), first)
		require.NoError(t, err)
		assert.Equal(t, digest, img.Digest)
		assert.Len(t, img.Attachments, 3, "two referrers and the .sbom tag")
	})

	hash, err := v1.NewHash(digest)
	require.NoError(t, err)
	idx, err := top.ImageIndex(hash)
	require.NoError(t, err)
	manifest, err := idx.IndexManifest()
	require.NoError(t, err)
	var platforms []string
	for _, desc := range manifest.Manifests {
		platforms = append(platforms, desc.Platform.OS+"/"+desc.Platform.Architecture)
	}
	assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, platforms)
	wantLabels := map[string]string{
		"org.opencontainers.image.title":    "pkgsync",
		"org.opencontainers.image.source":   version.Source,
		"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
		"org.opencontainers.image.version":  "v1.2.3-test",
		"org.opencontainers.image.created":  "2024-05-06T07:08:09Z",
	}
	assert.Equal(t, wantLabels, manifest.Annotations)

	for _, desc := range manifest.Manifests {
		arch := desc.Platform.Architecture
		t.Run(arch, func(t *testing.T) {
			img, err := idx.Image(desc.Digest)
			require.NoError(t, err)
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, "65532", cfg.Config.User, "USER 65532: Kubernetes' runAsNonRoot accepts it")
			assert.Equal(t, []string{"/pkgsync"}, cfg.Config.Entrypoint)
			assert.Equal(t, wantLabels, cfg.Config.Labels)
			assert.Equal(t, arch, cfg.Architecture)
			assert.True(t, cfg.Created.Equal(created), "created is the commit time, not the build time: %s", cfg.Created)

			files := imageFiles(t, img)
			assert.Contains(t, string(files["etc/passwd"].data), "nonroot:x:65532:65532:")
			pool := x509.NewCertPool()
			assert.True(t, pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"].data), "a CA bundle")
			for name, f := range files {
				mtime := f.hdr.ModTime
				assert.True(t, mtime.Equal(created) || mtime.Equal(time.Unix(0, 0)), "%s: fixed timestamp, got %s", name, mtime)
			}

			bin := files["pkgsync"]
			require.NotNil(t, bin.hdr, "/pkgsync is in the image")
			assert.Equal(t, int64(0o755), bin.hdr.Mode)
			path := filepath.Join(t.TempDir(), "pkgsync")
			require.NoError(t, os.WriteFile(path, bin.data, 0o755))
			assertStaticELF(t, path, arch)

			if arch != runtime.GOARCH || runtime.GOOS != "linux" {
				t.Logf("%s binary not run on %s/%s", arch, runtime.GOOS, runtime.GOARCH)
				return
			}
			out, err := exec.CommandContext(t.Context(), path, "version", "--output", "json").CombinedOutput()
			require.NoError(t, err, "the image's binary runs: %s", out)
			var info struct{ Version, Commit, Image, Platform string }
			require.NoError(t, json.Unmarshal(out, &info), string(out))
			assert.Equal(t, "v1.2.3-test", info.Version)
			assert.Equal(t, "0123456789abcdef0123456789abcdef01234567", info.Commit)
			assert.Equal(t, "ghcr.io/pkgsync/pkgsync:v1.2.3-test", info.Image)
			assert.Equal(t, "linux/"+arch, info.Platform)
		})
	}
}

// TestUsageErrors: a mistake in the command line exits 2 and says what to pass.
func TestUsageErrors(t *testing.T) {
	t.Setenv(sourceDateEpochEnv, "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no archive", []string{"--created", "0"}, "--archive FILE.tar"},
		{"no commit time", []string{"--archive", "x.tar"}, "--created"},
		{"a bad commit time", []string{"--archive", "x.tar", "--created", "yesterday"}, `--created "yesterday"`},
		{"a bad platform", []string{"--archive", "x.tar", "--created", "0", "--platform", "amd64"}, `--platform "amd64"`},
		{"a bad tag", []string{"--archive", "x.tar", "--created", "0", "--tag", "not a reference"}, "--tag"},
		{"a bad output format", []string{"--archive", "x.tar", "--created", "0", "--output-format", "yaml"}, "--output-format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runTool(t, tt.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

// extractLayout unpacks the OCI layout archive file into a directory go-containerregistry reads.
func extractLayout(t *testing.T, file string) layout.Path {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		require.True(t, strings.HasPrefix(target, dir+string(filepath.Separator)), "%s stays in the layout", hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			require.NoError(t, os.MkdirAll(target, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(target, data, 0o644))
	}
	p, err := layout.FromPath(dir)
	require.NoError(t, err)
	return p
}

// copyModule copies the source of the pkgsync module from to to: what go build reads, without
// the version control data, the tools' own modules, built binaries and outputs.
func copyModule(t *testing.T, from, to string) {
	t.Helper()
	skipDirs := map[string]bool{".git": true, "bin": true, "dist": true, "tools": true, ".cache": true}
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] && path != from {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || info.Size() > 8<<20 {
			return err // symbolic links and large files (binaries) are not source
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	require.NoError(t, err)
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return string(h.Sum(nil))
}

type imageFile struct {
	hdr  *tar.Header
	data []byte
}

// imageFiles reads the file system a runtime unpacks from the image's layers.
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[hdr.Name] = imageFile{hdr: hdr, data: data}
	}
}

// assertStaticELF checks the binary is for arch and needs no dynamic loader or shared library.
func assertStaticELF(t *testing.T, path, arch string) {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	assert.Equal(t, machine, f.Machine)
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "no dynamic loader: CGO_ENABLED=0")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs)
}
