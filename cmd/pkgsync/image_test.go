package main

import (
	"archive/tar"
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

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/test/testenv"
)

// TestImageBuildPushRun builds the controller image as make image does (both platforms, the
// real binary cross-compiled from this repository), twice, pushes it to a registry process,
// pulls it back with go-containerregistry (not the oras-go code that pushed it), checks what
// a container runtime reads, and runs the binary of this machine's platform from the image.
//
// The go builds cost a few minutes with a cold build cache (CI runs make image first, which
// warms it) and seconds of linking with a warm one.
func TestImageBuildPushRun(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	dir := t.TempDir()
	// Two copies of the module at different paths, taken at once: the builds see the same
	// source even while someone edits the working tree, and must not depend on where it is.
	checkouts := []string{filepath.Join(dir, "checkout-a"), filepath.Join(dir, "elsewhere", "checkout-b")}
	for _, c := range checkouts {
		copyModule(t, "../..", c)
	}
	ref := reg.Host + "/" + testenv.Repository(t, "pkgsync/controller") + ":v1.2.3-test"
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	args := []string{"image", "--platform", "linux/amd64,linux/arm64", "--version", "v1.2.3-test",
		"--revision", "0123456789abcdef0123456789abcdef01234567", "--created", created.Format(time.RFC3339), "--output-format", "digest"}

	first := filepath.Join(dir, "first.tar")
	outputs := func(name string) []string {
		return []string{"--sbom", filepath.Join(dir, name+".spdx.json"), "--provenance", filepath.Join(dir, name+".intoto.json")}
	}
	stdout, stderr, err := runCLI(t, append(append(args, outputs("first")...), "--dir", checkouts[0], "--archive", first, "--tag", ref, "--push")...)
	require.NoError(t, err, stderr)
	digest := strings.TrimSpace(stdout)
	require.True(t, strings.HasPrefix(digest, "sha256:"), stdout)

	t.Run("the same commit gives the same digest", func(t *testing.T) {
		second := filepath.Join(dir, "second.tar")
		stdout, stderr, err := runCLI(t, append(append(args, outputs("second")...), "--dir", checkouts[1], "--archive", second, "--tag", ref)...)
		require.NoError(t, err, stderr)
		assert.Equal(t, digest, strings.TrimSpace(stdout), "binaries rebuilt in another checkout, image assembled again: the same index digest")
		assert.Equal(t, fileSHA256(t, first), fileSHA256(t, second), "and the same layout archive, byte for byte")
		for _, ext := range []string{".spdx.json", ".intoto.json"} {
			assert.Equal(t, fileSHA256(t, filepath.Join(dir, "first"+ext)), fileSHA256(t, filepath.Join(dir, "second"+ext)), "the same %s, byte for byte", ext)
		}
	})

	t.Run("the SBOM and provenance are attached", func(t *testing.T) {
		repoName := strings.TrimSuffix(ref, ":v1.2.3-test")
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
		require.NoError(t, json.Unmarshal(mustRead(t, filepath.Join(dir, "first.intoto.json")), &stmt))
		assert.Equal(t, "https://slsa.dev/provenance/v1", stmt.PredicateType)
		require.Len(t, stmt.Subject, 1)
		assert.Equal(t, repoName, stmt.Subject[0].Name)
		assert.Equal(t, strings.TrimPrefix(digest, "sha256:"), stmt.Subject[0].Digest["sha256"])

		r := plainRepository(t, repoName)
		desc, err := r.Resolve(t.Context(), digest)
		require.NoError(t, err)
		var types []string
		require.NoError(t, r.Referrers(t.Context(), desc, "", func(refs []ocispec.Descriptor) error {
			for _, d := range refs {
				types = append(types, d.ArtifactType)
			}
			return nil
		}))
		assert.ElementsMatch(t, []string{"application/spdx+json", "application/vnd.in-toto+json"}, types)
		m := fetchManifest(t, repoName, strings.Replace(digest, ":", "-", 1)+".sbom")
		assert.Len(t, m.Layers, 1, "cosign's .sbom tag holds the SBOM")

		// pkgsync push reads the archive, attachments and all, as the image.
		_, stderr, err := runCLI(t, "push", first, repoName+":pushed-again")
		require.NoError(t, err, stderr)
	})

	parsed, err := name.ParseReference(ref)
	require.NoError(t, err)
	idx, err := remote.Index(parsed, remote.WithContext(t.Context()))
	require.NoError(t, err)
	pulled, err := idx.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest, pulled.String(), "the registry serves the index that was built")
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
			var info versionInfo
			require.NoError(t, json.Unmarshal(out, &info), string(out))
			assert.Equal(t, "v1.2.3-test", info.Version)
			assert.Equal(t, "0123456789abcdef0123456789abcdef01234567", info.Commit)
			assert.Equal(t, "ghcr.io/pkgsync/pkgsync:v1.2.3-test", info.Image)
			assert.Equal(t, "linux/"+arch, info.Platform)
		})
	}
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

func TestImageFlags(t *testing.T) {
	t.Setenv(sourceDateEpochEnv, "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"nothing to do", []string{"--created", "0"}, "nothing to do"},
		{"push without tag", []string{"--created", "0", "--push"}, "--push needs at least one --tag"},
		{"no commit time", []string{"--archive", "x.tar"}, "--created"},
		{"a bad commit time", []string{"--archive", "x.tar", "--created", "yesterday"}, `--created "yesterday"`},
		{"a bad platform", []string{"--archive", "x.tar", "--created", "0", "--platform", "amd64"}, `--platform "amd64"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"image"}, tt.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			var code exitCodeError
			require.ErrorAs(t, err, &code)
			assert.Equal(t, 2, code.code)
		})
	}
}

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
