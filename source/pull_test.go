package source

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/test/testenv"
)

func TestCacheDir(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	img, ref := pushPackage(t, newClient(t, Options{}), reg.Host, testenv.Repository(t, "cached"), nil)
	ref = ref.WithDigest(img.Digest)
	cacheDir := t.TempDir()

	first, err := newClient(t, Options{CacheDir: cacheDir}).Pull(t.Context(), ref, nil)
	require.NoError(t, err)

	// A new process (client) with the same directory pulls without a download: one HEAD request
	// checks the caller may read the digest.
	counter := newCountingTransport()
	second, err := newClient(t, Options{CacheDir: cacheDir, Transport: counter}).Pull(t.Context(), ref, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"HEAD manifests"}, counter.requests)
	assert.Equal(t, readTree(t, first.FS), readTree(t, second.FS))
}

func TestPullVerifiesDigests(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	img, ref := pushPackage(t, newClient(t, Options{}), reg.Host, testenv.Repository(t, "tampered"), nil)

	counter := newCountingTransport()
	counter.corrupt = true
	cacheDir := t.TempDir()
	_, err := newClient(t, Options{Transport: counter, CacheDir: cacheDir}).Pull(t.Context(), ref.WithDigest(img.Digest), nil)
	require.ErrorIs(t, err, content.ErrMismatchedDigest)
	var m ocispec.Manifest
	require.NoError(t, json.Unmarshal(img.manifest, &m))
	repoDir := (&diskCache{dir: cacheDir}).forRepository(ref).dir
	_, err = os.Stat(repoDir + "/blobs/sha256/" + m.Layers[0].Digest.Encoded())
	assert.ErrorIs(t, err, fs.ErrNotExist, "a corrupt layer is not cached")
	entries, err := os.ReadDir(repoDir + "/blobs/sha256")
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), ".tmp-"), "temporary file %s left behind", e.Name())
	}
}

func TestPullLimits(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	_, ref := pushPackage(t, newClient(t, Options{}), reg.Host, testenv.Repository(t, "limits"), nil)
	tests := []struct {
		limits  Limits
		wantMsg string
	}{
		{Limits{MaxCompressedBytes: 10}, "over the limit of 10"},
		{Limits{MaxUncompressedBytes: 10}, "larger than 10 bytes"},
		{Limits{MaxFiles: 2}, "more than 2 files"},
		{Limits{MaxPathLength: 5}, "longer than 5 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.wantMsg, func(t *testing.T) {
			_, err := newClient(t, Options{Limits: tt.limits}).Pull(t.Context(), ref, nil)
			require.ErrorIs(t, err, ErrLimit)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
}

// pkoLayer is a Package Operator image's single layer: the package under package/, next to
// files that are not part of it.
const (
	pkoManifest = "apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: pko\nspec:\n  scopes: [Namespaced]\n  phases: [{name: deploy}]\n"
	pkoObject   = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pko-cm\n  annotations: {package-operator.run/phase: deploy}\n"
)

func pkoLayer(t *testing.T) []byte {
	t.Helper()
	return makeTar(t,
		tarEntry{name: "package/", typeflag: tar.TypeDir},
		file("package/manifest.yaml", pkoManifest),
		tarEntry{name: "package/deploy/", typeflag: tar.TypeDir},
		file("package/deploy/cm.yaml", pkoObject),
		file("README.md", "not part of the package"),
	)
}

// pushPackageOperatorImage builds a Docker schema2 image with go-containerregistry, an
// implementation independent of pkgsync's, and uploads it with oras.
func pushPackageOperatorImage(t *testing.T, host, repo, tag string) string {
	t.Helper()
	ctx := t.Context()
	layerTar := pkoLayer(t)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	img = mutate.MediaType(img, types.DockerManifestSchema2)
	img = mutate.ConfigMediaType(img, types.DockerConfigJSON)

	target, err := remote.NewRepository(host + "/" + repo)
	require.NoError(t, err)
	target.PlainHTTP = true
	push := func(mediaType types.MediaType, data []byte) ocispec.Descriptor {
		desc := ocispec.Descriptor{MediaType: string(mediaType), Digest: digest.FromBytes(data), Size: int64(len(data))}
		require.NoError(t, target.Push(ctx, desc, bytes.NewReader(data)))
		return desc
	}
	config, err := img.RawConfigFile()
	require.NoError(t, err)
	push(types.DockerConfigJSON, config)
	rc, err := layer.Compressed()
	require.NoError(t, err)
	compressed, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	layerType, err := layer.MediaType()
	require.NoError(t, err)
	require.Equal(t, types.DockerLayer, layerType)
	push(layerType, compressed)
	manifest, err := img.RawManifest()
	require.NoError(t, err)
	desc := ocispec.Descriptor{MediaType: string(types.DockerManifestSchema2), Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}
	err = target.PushReference(ctx, desc, bytes.NewReader(manifest), tag)
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) && resp.StatusCode == http.StatusUnsupportedMediaType {
		t.Fatalf("the registry at %s refuses Docker schema2 manifests (%v), the format Package Operator images use; "+
			"zot accepts them only with http.compat: [\"docker2s2\"] in its configuration", host, err)
	}
	require.NoError(t, err)
	return desc.Digest.String()
}

func TestPullPackageOperatorImage(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	name := testenv.Repository(t, "pko")
	dgst := pushPackageOperatorImage(t, reg.Host, name, "v1")

	a, err := newClient(t, Options{}).Pull(t.Context(), mustRef(t, reg.Host+"/"+name+":v1"), nil)
	require.NoError(t, err)
	assert.Equal(t, dgst, a.Digest)
	assert.Equal(t, FormatPackageOperator, a.Format)
	// The image's files as they are: render finds the package under package/, as it does in
	// a directory holding an unpacked image (render: TestRenderGolden/pko).
	assert.Equal(t, map[string]string{
		"package/manifest.yaml":  pkoManifest,
		"package/deploy/cm.yaml": pkoObject,
		"README.md":              "not part of the package",
	}, readTree(t, a.FS))
	res, err := render.Render(t.Context(), a.FS, render.Options{})
	require.NoError(t, err)
	assert.Equal(t, "pko", res.Manifest.Name)
	require.Len(t, res.Phases, 1)
	require.Len(t, res.Phases[0].Objects, 1)
	assert.Equal(t, "pko-cm", res.Phases[0].Objects[0].GetName())
}

func TestPullRejectsOtherArtifacts(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	ctx := t.Context()
	other := reg.Host + "/" + testenv.Repository(t, "other")
	target, err := remote.NewRepository(other)
	require.NoError(t, err)
	target.PlainHTTP = true
	configData := []byte("{}")
	config := ocispec.Descriptor{MediaType: "application/vnd.example.config+json", Digest: digest.FromBytes(configData), Size: 2}
	require.NoError(t, target.Push(ctx, config, bytes.NewReader(configData)))
	manifest := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"artifactType":"application/vnd.example","config":{"mediaType":%q,"digest":%q,"size":2},"layers":[]}`,
		ocispec.MediaTypeImageManifest, config.MediaType, config.Digest))
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}
	require.NoError(t, target.PushReference(ctx, desc, bytes.NewReader(manifest), "v1"))

	_, err = newClient(t, Options{}).Pull(ctx, mustRef(t, other+":v1"), nil)
	require.ErrorContains(t, err, `image of type "application/vnd.example" is not a package`)
}
