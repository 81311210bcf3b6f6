package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"

	"pkgsync.dev/pkgsync/test/testenv"
)

func TestBuildIsReproducible(t *testing.T) {
	t.Parallel()
	dir := testenv.PackageDir(t)
	first, err := Build(dir, BuildOptions{Version: "1.0.0"})
	require.NoError(t, err)

	// Same files, written later and in another order, in another directory.
	again := t.TempDir()
	testenv.WriteTree(t, again, map[string]string{"config.yaml.gotmpl": "a: {{ .config.a }}\n"})
	testenv.WriteTree(t, again, map[string]string{
		"deploy/_helpers.tpl":    "{{ define \"x\" }}{{ end }}",
		"deploy/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\n",
		"manifest.yaml":          testenv.PackageManifest,
	})
	require.NoError(t, os.Chmod(filepath.Join(again, "manifest.yaml"), 0o755))
	second, err := Build(again, BuildOptions{Version: "1.0.0"})
	require.NoError(t, err)
	assert.Equal(t, first.Digest, second.Digest)

	other, err := Build(dir, BuildOptions{Version: "1.0.1"})
	require.NoError(t, err)
	assert.NotEqual(t, first.Digest, other.Digest, "the version is part of the image")
}

func TestBuildManifest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := testenv.PackageDir(t)
	img, err := Build(dir, BuildOptions{
		Version: "1.2.3", Source: "https://example.com/repo", Revision: "abc123", BuilderVersion: "v9.8.7",
		Annotations: map[string]string{"example.com/team": "blue"},
	})
	require.NoError(t, err)
	var m ocispec.Manifest
	require.NoError(t, json.Unmarshal(img.manifest, &m))
	assert.Equal(t, ArtifactType, m.ArtifactType)
	assert.Equal(t, ocispec.MediaTypeImageManifest, m.MediaType)
	assert.Equal(t, ConfigMediaType, m.Config.MediaType)
	require.Len(t, m.Layers, 1)
	assert.Equal(t, ocispec.MediaTypeImageLayerGzip, m.Layers[0].MediaType)
	assert.Equal(t, map[string]string{
		ocispec.AnnotationTitle:    "demo",
		ocispec.AnnotationVersion:  "1.2.3",
		ocispec.AnnotationSource:   "https://example.com/repo",
		ocispec.AnnotationRevision: "abc123",
		"example.com/team":         "blue",
	}, m.Annotations, "no created annotation unless asked for")

	config, err := content.FetchAll(ctx, img.store, m.Config)
	require.NoError(t, err)
	var cfg packageConfig
	require.NoError(t, json.Unmarshal(config, &cfg))
	assert.Equal(t, "demo", cfg.Name)
	assert.Equal(t, "1.2.3", cfg.Version)
	assert.Equal(t, "v9.8.7", cfg.PkgsyncVersion, "the caller names the builder")

	// The layer unpacks to the directory, with fixed metadata and a bare gzip header.
	layer, err := content.FetchAll(ctx, img.store, m.Layers[0])
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	require.NoError(t, err)
	assert.Empty(t, zr.Name)
	assert.True(t, zr.ModTime.IsZero())
	u := newUnpacker(Limits{})
	require.NoError(t, u.unpack(bytes.NewReader(layer), true))
	assert.Equal(t, readTree(t, os.DirFS(dir)), readTree(t, u.files))

	withCreated, err := Build(testenv.PackageDir(t), BuildOptions{Created: created})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(withCreated.manifest, &m))
	assert.Equal(t, "2026-01-02T03:04:05Z", m.Annotations[ocispec.AnnotationCreated])
}

func TestBuildSkipsDotFiles(t *testing.T) {
	t.Parallel()
	dir := testenv.PackageDir(t)
	plain, err := Build(dir, BuildOptions{})
	require.NoError(t, err)
	testenv.WriteTree(t, dir, map[string]string{".git/config": "x", ".hidden.yaml": "y", "deploy/.swp": "z"})
	withDots, err := Build(dir, BuildOptions{})
	require.NoError(t, err)
	assert.Equal(t, plain.Digest, withDots.Digest)
}

func TestBuildRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		opts    BuildOptions
		wantErr string
	}{
		{
			name: "symlink",
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.Symlink("manifest.yaml", filepath.Join(dir, "link.yaml")))
			},
			wantErr: "link.yaml is a symbolic link",
		},
		{
			name:    "no manifest",
			setup:   func(t *testing.T, dir string) { require.NoError(t, os.Remove(filepath.Join(dir, "manifest.yaml"))) },
			wantErr: "no manifest.yaml",
		},
		{
			name: "wrong kind",
			setup: func(t *testing.T, dir string) {
				testenv.WriteTree(t, dir, map[string]string{"manifest.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"})
			},
			wantErr: "want pkgsync.dev/v1alpha1 PackageManifest",
		},
		{
			name: "no name",
			setup: func(t *testing.T, dir string) {
				testenv.WriteTree(t, dir, map[string]string{"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\n"})
			},
			wantErr: "no metadata.name",
		},
		{
			name:    "validation",
			opts:    BuildOptions{Validate: func(fs.FS) error { return errors.New("phase x unknown") }},
			wantErr: "validate: phase x unknown",
		},
		{
			name:    "too many files",
			opts:    BuildOptions{Limits: Limits{MaxFiles: 2}},
			wantErr: "more than 2 files",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := testenv.PackageDir(t)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			_, err := Build(dir, tt.opts)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestBuildAcceptsPackageOperatorManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, map[string]string{"manifest.yml": "apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: pko\nspec:\n  scopes: [Namespaced]\n  phases: [{name: a}]\n"})
	var seen []string
	img, err := Build(dir, BuildOptions{Validate: func(fsys fs.FS) error {
		seen = append(seen, readTree(t, fsys)["manifest.yml"])
		return nil
	}})
	require.NoError(t, err)
	assert.Equal(t, "pko", img.Name)
	assert.Len(t, seen, 1, "the validation hook sees the directory")
}

func TestLayoutRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	img, err := Build(testenv.PackageDir(t), BuildOptions{Version: "1"})
	require.NoError(t, err)

	var first, second bytes.Buffer
	require.NoError(t, img.WriteLayout(ctx, &first, []string{"v1", "latest"}))
	require.NoError(t, img.WriteLayout(ctx, &second, []string{"latest", "v1"}))
	assert.Equal(t, first.Bytes(), second.Bytes(), "the archive is reproducible")

	file := filepath.Join(t.TempDir(), "pkg.tar")
	require.NoError(t, os.WriteFile(file, first.Bytes(), 0o600))
	loaded, err := LoadLayout(ctx, file)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, loaded.Digest)
	assert.Equal(t, "demo", loaded.Name)
	assert.Equal(t, img.manifest, loaded.manifest)

	_, err = LoadLayout(ctx, filepath.Join(t.TempDir(), "missing.tar"))
	require.Error(t, err)
}
