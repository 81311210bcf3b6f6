package source

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

// countingTransport records the registry requests a client makes, by method and API
// ("HEAD manifests", "GET blobs"), and can corrupt blob downloads.
type countingTransport struct {
	base    http.RoundTripper
	corrupt bool

	mu       sync.Mutex
	requests []string
}

func newCountingTransport() *countingTransport {
	return &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	api := "other"
	for _, a := range []string{"manifests", "blobs"} {
		if strings.Contains(req.URL.Path, "/"+a+"/") {
			api = a
		}
	}
	c.mu.Lock()
	c.requests = append(c.requests, req.Method+" "+api)
	c.mu.Unlock()
	resp, err := c.base.RoundTrip(req)
	if err == nil && c.corrupt && api == "blobs" && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		data, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if readErr != nil {
			return nil, readErr
		}
		data[len(data)/2] ^= 0xff
		resp.Body = io.NopCloser(bytes.NewReader(data))
	}
	return resp, err
}

// count returns how many requests matched "METHOD api".
func (c *countingTransport) count(request string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.requests {
		if r == request {
			n++
		}
	}
	return n
}

func (c *countingTransport) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := NewClient(opts)
	require.NoError(t, err)
	return c
}

func mustRef(t *testing.T, s string) Reference {
	t.Helper()
	ref, err := ParseReference(s)
	require.NoError(t, err)
	return ref
}

// pushPackage builds the test package and pushes it to HOST/REPO:v1.
func pushPackage(t *testing.T, c *Client, host, repo string, creds Credentials) (*Image, Reference) {
	t.Helper()
	img, err := Build(newPackageDir(t), BuildOptions{Version: "1.0.0"})
	require.NoError(t, err)
	ref := mustRef(t, host+"/"+repo+":v1")
	_, err = c.Push(t.Context(), img, []Reference{ref}, creds)
	require.NoError(t, err)
	return img, ref
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	ctx := t.Context()
	dir := newPackageDir(t)
	img, err := Build(dir, BuildOptions{Version: "1.0.0", Source: "https://example.com/demo"})
	require.NoError(t, err)

	c := newClient(t, Options{})
	demo, other := reg.Host+"/"+testenv.Repository(t, "demo"), reg.Host+"/"+testenv.Repository(t, "other")
	refs := []Reference{mustRef(t, demo+":v1"), mustRef(t, demo+":stable")}
	pushed, err := c.Push(ctx, img, refs, nil)
	require.NoError(t, err)
	require.Len(t, pushed, 2)
	assert.Equal(t, demo+":v1@"+img.Digest, pushed[0].String())

	for _, ref := range refs {
		// A fresh client: nothing cached.
		a, err := newClient(t, Options{}).Pull(ctx, ref, nil)
		require.NoError(t, err)
		assert.Equal(t, img.Digest, a.Digest)
		assert.Equal(t, FormatPkgsync, a.Format)
		assert.Equal(t, "demo", a.Annotations[ocispec.AnnotationTitle])
		assert.Equal(t, "https://example.com/demo", a.Annotations[ocispec.AnnotationSource])
		assert.Equal(t, readTree(t, os.DirFS(dir)), readTree(t, a.FS))
	}

	// Through an OCI layout archive: same digest, same tree.
	var layout bytes.Buffer
	require.NoError(t, img.WriteLayout(ctx, &layout, []string{"v2"}))
	file := t.TempDir() + "/demo.tar"
	require.NoError(t, os.WriteFile(file, layout.Bytes(), 0o600))
	loaded, err := LoadLayout(ctx, file)
	require.NoError(t, err)
	_, err = c.Push(ctx, loaded, []Reference{mustRef(t, other+":v2")}, nil)
	require.NoError(t, err)
	a, err := newClient(t, Options{}).Pull(ctx, mustRef(t, other+":v2"), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)
	assert.Equal(t, readTree(t, os.DirFS(dir)), readTree(t, a.FS))

	// A reference pinned to another digest is refused.
	_, err = c.Push(ctx, img, []Reference{mustRef(t, demo+"@"+digest.FromString("x").String())}, nil)
	require.ErrorContains(t, err, "the reference pins")
}

func TestResolve(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	name := testenv.Repository(t, "resolve")
	img, ref := pushPackage(t, newClient(t, Options{}), reg.Host, name, nil)

	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	got, err := c.Resolve(t.Context(), ref, nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, got)
	assert.Equal(t, 1, counter.total(), "one request: %v", counter.requests)
	assert.Equal(t, 1, counter.count("HEAD manifests"))

	got, err = c.Resolve(t.Context(), ref.WithDigest(img.Digest), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, got)
	assert.Equal(t, 1, counter.total(), "a pinned reference resolves without a request")

	_, err = c.Resolve(t.Context(), mustRef(t, reg.Host+"/"+name+":nope"), nil)
	require.ErrorContains(t, err, "tag nope not found in "+reg.Host+"/"+name)
	missing := reg.Host + "/" + testenv.Repository(t, "missing")
	_, err = c.Resolve(t.Context(), mustRef(t, missing+":v1"), nil)
	require.ErrorContains(t, err, "tag v1 not found in "+missing)
}

func TestConcurrentPullsDownloadOnce(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	img, ref := pushPackage(t, newClient(t, Options{}), reg.Host, testenv.Repository(t, "shared"), nil)
	ref = ref.WithDigest(img.Digest)

	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	const n = 10
	artifacts := make([]*Artifact, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := c.Pull(t.Context(), ref, nil)
			assert.NoError(t, err)
			artifacts[i] = a
		})
	}
	wg.Wait()
	for _, a := range artifacts {
		assert.Same(t, artifacts[0], a)
	}
	_, err := c.Pull(t.Context(), ref, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, counter.count("GET blobs"), "requests: %v", counter.requests)
	assert.Equal(t, 1, counter.count("GET manifests"), "requests: %v", counter.requests)
	// The callers share one credential, hence one access check.
	assert.Equal(t, 1, counter.count("HEAD manifests"), "requests: %v", counter.requests)
}

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

func TestAuth(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	secret := func(user, password string) Credentials {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		creds, err := CredentialsFromDockerConfigJSON([]byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, auth)))
		require.NoError(t, err)
		return creds
	}
	good := secret(reg.Username, reg.Password)
	c := newClient(t, Options{})
	img, ref := pushPackage(t, c, reg.Host, "private", good)

	a, err := c.Pull(t.Context(), ref, good)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)

	// The same client, so a cached token of the good credentials would show here.
	tests := map[string]Credentials{
		"no credentials": nil,
		"wrong password": secret(reg.Username, "wrong"),
		"other registry": func() Credentials {
			creds, err := CredentialsFromDockerConfigJSON([]byte(`{"auths":{"elsewhere.example.com":{"auth":"eDp5"}}}`))
			require.NoError(t, err)
			return creds
		}(),
	}
	for name, creds := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := c.Pull(t.Context(), ref, creds)
			require.ErrorContains(t, err, "authentication required for "+reg.Host)
			_, err = c.Push(t.Context(), img, []Reference{mustRef(t, reg.Host+"/private:other")}, creds)
			require.ErrorContains(t, err, "authentication required for "+reg.Host)
		})
	}

	// Default credentials from the options answer when a call brings none.
	withDefault := newClient(t, Options{Credentials: good})
	_, err = withDefault.Resolve(t.Context(), ref, nil)
	require.NoError(t, err)
}

// testCA returns the PEM of a self-signed CA that signed nothing the registry uses.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "unrelated test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestTLS(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{TLS: true})
	ca, err := os.ReadFile(reg.CAFile)
	require.NoError(t, err)

	c := newClient(t, Options{CABundle: ca})
	img, ref := pushPackage(t, c, reg.Host, "tls", nil)
	a, err := newClient(t, Options{CABundle: ca}).Pull(t.Context(), ref, nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)

	insecure, err := newClient(t, Options{InsecureSkipTLSVerify: true}).Resolve(t.Context(), ref, nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, insecure)

	// Without a CA a loopback registry is reached over plain HTTP, which a TLS registry refuses.
	_, err = newClient(t, Options{}).Resolve(t.Context(), ref, nil)
	require.ErrorIs(t, err, ErrHTTPSRequired)
	require.NotContains(t, err.Error(), "--", "source names no flags: the caller adds its own hint")

	// With the wrong CA, verification fails.
	_, err = newClient(t, Options{CABundle: testCA(t)}).Resolve(t.Context(), ref, nil)
	require.ErrorContains(t, err, "TLS verification failed for "+reg.Host)
	require.ErrorIs(t, err, ErrTLSVerification)
	require.NotContains(t, err.Error(), "--", "source names no flags: the caller adds its own hint")

	_, err = NewClient(Options{CABundle: []byte("not PEM")})
	require.ErrorContains(t, err, "no PEM certificate")
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

// TestPullUnblocksOnCancel checks a caller can leave a merged pull it no longer wants.
func TestPullHonoursCancel(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	name := testenv.Repository(t, "cancel")
	img, _ := pushPackage(t, newClient(t, Options{}), reg.Host, name, nil)

	// In front of the registry, a proxy that holds every layer download until the test ends:
	// the pull is blocked on the network when it is cancelled.
	stalled, release := make(chan struct{}), make(chan struct{})
	var stallOnce sync.Once
	upstream := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: reg.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			stallOnce.Do(func() { close(stalled) })
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(w, "held until the test ended", http.StatusNotFound)
			return
		}
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close, which waits for held requests

	client := newClient(t, Options{})
	ref := mustRef(t, strings.TrimPrefix(srv.URL, "http://")+"/"+name+"@"+img.Digest)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := client.Pull(ctx, ref, nil)
		done <- err
	}()
	select {
	case <-stalled:
	case err := <-done:
		t.Fatalf("Pull returned before it reached the layer download: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the pull never reached the layer download")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Pull is still blocked 10s after its context was cancelled")
	}
}
