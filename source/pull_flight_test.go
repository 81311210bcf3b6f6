package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	flightWait = 30 * time.Second
	flightTick = 10 * time.Millisecond
)

// stallingRegistry serves one pkgsync manifest under every repository name, and its gzip layer
// but for the gzip trailer until release is closed: what a registry run by a tenant can do to
// keep pulls open. It counts the downloads it holds, and those whose client went away.
type stallingRegistry struct {
	manifest, layer []byte
	release         chan struct{}
	once            sync.Once
	stalled, closed atomic.Int64
}

// newStallingRegistry serves a package of one file of fileBytes zero bytes.
func newStallingRegistry(t *testing.T, fileBytes int) (*stallingRegistry, string) {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "manifest.yaml", Mode: 0o644, Size: int64(fileBytes), Typeflag: tar.TypeReg}))
	_, err := tw.Write(make([]byte, fileBytes))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(tarBuf.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	layer := gz.Bytes()
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": ocispec.MediaTypeImageManifest, "artifactType": ArtifactType,
		"config": ocispec.DescriptorEmptyJSON,
		"layers": []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromBytes(layer), Size: int64(len(layer))}},
	})
	require.NoError(t, err)
	reg := &stallingRegistry{manifest: manifest, layer: layer, release: make(chan struct{})}
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	t.Cleanup(reg.releaseAll)
	return reg, strings.TrimPrefix(srv.URL, "http://")
}

// releaseAll lets every held download, and those to come, end.
func (s *stallingRegistry) releaseAll() { s.once.Do(func() { close(s.release) }) }

func (s *stallingRegistry) digest() string { return digest.FromBytes(s.manifest).String() }

func (s *stallingRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v2/":
	case strings.Contains(r.URL.Path, "/manifests/"):
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		w.Header().Set("Docker-Content-Digest", s.digest())
		w.Header().Set("Content-Length", strconv.Itoa(len(s.manifest)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(s.manifest)
		}
	case strings.Contains(r.URL.Path, "/blobs/"):
		w.Header().Set("Content-Length", strconv.Itoa(len(s.layer)))
		_, _ = w.Write(s.layer[:len(s.layer)-8])
		w.(http.Flusher).Flush()
		s.stalled.Add(1)
		select {
		case <-s.release:
			_, _ = w.Write(s.layer[len(s.layer)-8:])
		case <-r.Context().Done():
			s.closed.Add(1)
		}
	default:
		http.NotFound(w, r)
	}
}

// A tenant's registry that claims one digest under many repository names and stalls each
// download keeps each pull open. Once the reconcile that started a pull gives up, the pull
// stops: its request is cancelled (the registry sees the connection close) and what it unpacked
// is given back, instead of being held for the pull's own timeout.
func TestAbandonedPullsStop(t *testing.T) {
	t.Parallel()
	const fileBytes = 1 << 20
	const pulls = 4
	reg, host := newStallingRegistry(t, fileBytes)
	c := newClient(t, Options{PlainHTTPHosts: []string{host}})

	for i := range pulls {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := c.Pull(ctx, mustRef(t, fmt.Sprintf("%s/r%d@%s", host, i, reg.digest())), nil)
			done <- err
		}()
		// The download is held, its file unpacked: then the reconcile gives up.
		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			assert.Equal(ct, int64(i+1), reg.stalled.Load())
			assert.Equal(ct, int64(fileBytes), c.pullBudget.held.Load())
		}, flightWait, flightTick)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			assert.Equal(ct, int64(i+1), reg.closed.Load(), "stalled downloads whose client went away")
			assert.Zero(ct, c.pullBudget.held.Load(), "bytes held by pulls in flight")
		}, flightWait, flightTick)
	}
}

// waiters is the number of callers waiting for the call of key.
func (g *flightGroup) waiters(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if call, ok := g.calls[key]; ok {
		return call.waiters
	}
	return 0
}

// A caller merged into another's pull is not failed when the caller that started it gives up:
// the pull runs on for it, and ends with the package.
func TestMergedPullOutlivesFirstCaller(t *testing.T) {
	t.Parallel()
	reg, host := newStallingRegistry(t, 1024)
	c := newClient(t, Options{PlainHTTPHosts: []string{host}})
	ref := mustRef(t, host+"/shared@"+reg.digest())

	firstCtx, cancelFirst := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := c.Pull(firstCtx, ref, nil)
		first <- err
	}()
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, int64(1), reg.stalled.Load())
	}, flightWait, flightTick)
	second := make(chan error, 1)
	go func() {
		a, err := c.Pull(t.Context(), ref, nil)
		if err == nil && a.Digest != reg.digest() {
			err = fmt.Errorf("pulled %s", a.Digest)
		}
		second <- err
	}()
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, 2, c.flight.waiters(ref.Content()))
	}, flightWait, flightTick)

	cancelFirst()
	require.ErrorIs(t, <-first, context.Canceled)
	assert.Equal(t, 1, c.flight.waiters(ref.Content()))
	reg.releaseAll()
	require.NoError(t, <-second)
	assert.Equal(t, int64(1), reg.stalled.Load(), "one download for both callers")
	assert.Zero(t, reg.closed.Load(), "the download was not cancelled")
	assert.Zero(t, c.pullBudget.held.Load())
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

// TestPullHonoursCancel checks a caller can leave a merged pull it no longer wants.
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
