package source

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/registry/remote/auth"

	"pkgsync.dev/pkgsync/test/testenv"
)

// dockerConfigCredentials returns the credentials a pull secret for host with user and password
// gives.
func dockerConfigCredentials(t *testing.T, host, user, password string) Credentials {
	t.Helper()
	encoded := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	creds, err := CredentialsFromDockerConfigJSON([]byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, encoded)))
	require.NoError(t, err)
	return creds
}

// TestPullRefusesCachedPackagesToOtherCallers is the attack: caller A pulls a private package,
// then callers without A's credentials name it by digest and must not get it from the memory
// cache or from the cache directory.
func TestPullRefusesCachedPackagesToOtherCallers(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	good := dockerConfigCredentials(t, reg.Host, reg.Username, reg.Password)
	img, _ := pushPackage(t, newClient(t, Options{}), reg.Host, "private", good)
	pinned := mustRef(t, reg.Host+"/private@"+img.Digest)
	intruders := map[string]Credentials{
		"no credentials": nil,
		"wrong password": dockerConfigCredentials(t, reg.Host, reg.Username, "wrong"),
	}

	// The error a caller gets from a client that has nothing cached: a cached package must not
	// change it, or the error would tell the digest is cached.
	coldErrors := map[string]string{}
	for name, creds := range intruders {
		_, err := newClient(t, Options{}).Pull(t.Context(), pinned, creds)
		require.ErrorContains(t, err, "authentication required for "+reg.Host)
		coldErrors[name] = err.Error()
	}

	tests := map[string]struct {
		// cached returns a client that holds the package, pulled by its owner.
		cached func(t *testing.T, transport http.RoundTripper) *Client
	}{
		"memory cache": {
			cached: func(t *testing.T, transport http.RoundTripper) *Client {
				c := newClient(t, Options{Transport: transport})
				_, err := c.Pull(t.Context(), pinned, good)
				require.NoError(t, err)
				return c
			},
		},
		"cache directory": {
			cached: func(t *testing.T, transport http.RoundTripper) *Client {
				dir := t.TempDir()
				_, err := newClient(t, Options{CacheDir: dir}).Pull(t.Context(), pinned, good)
				require.NoError(t, err)
				// A new client on the same directory: only the disk holds the package.
				return newClient(t, Options{CacheDir: dir, Transport: transport})
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			counter := newCountingTransport()
			c := tt.cached(t, counter)
			for intruder, creds := range intruders {
				before := counter.count("GET blobs")
				a, err := c.Pull(t.Context(), pinned, creds)
				assert.Nil(t, a, intruder)
				if assert.Error(t, err, intruder) {
					assert.Equal(t, coldErrors[intruder], err.Error(), intruder)
				}
				assert.Equal(t, before, counter.count("GET blobs"), "%s: requests: %v", intruder, counter.requests)
			}

			// The owner still gets it, from the cache.
			blobs := counter.count("GET blobs")
			a, err := c.Pull(t.Context(), pinned, good)
			require.NoError(t, err)
			assert.Equal(t, img.Digest, a.Digest)
			assert.Equal(t, readTree(t, os.DirFS(testenv.PackageDir(t))), readTree(t, a.FS))
			assert.Equal(t, blobs, counter.count("GET blobs"), "requests: %v", counter.requests)
		})
	}
}

// fakeRegistry serves one manifest, by digest, under every repository and no blob: a registry
// an attacker runs, answering yes to whatever digest it is asked about.
func fakeRegistry(t *testing.T, manifest []byte, mediaType string) (host string, blobRequests func() int) {
	t.Helper()
	dgst := digest.FromBytes(manifest).String()
	var (
		mu    sync.Mutex
		blobs int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/manifests/"+dgst):
			w.Header().Set("Content-Type", mediaType)
			w.Header().Set("Docker-Content-Digest", dgst)
			w.Header().Set("Content-Length", strconv.Itoa(len(manifest)))
			if r.Method == http.MethodGet {
				write(t, w, manifest)
			}
		default:
			if strings.Contains(r.URL.Path, "/blobs/") {
				mu.Lock()
				blobs++
				mu.Unlock()
			}
			http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() int {
		mu.Lock()
		defer mu.Unlock()
		return blobs
	}
}

// TestPullDoesNotServeCachedBlobsToOtherRepositories is the attack through a registry the
// attacker runs: it answers for the private package's manifest (digests are no secret, nor is a
// manifest's content), and the layers would come from the cache. The cache must hold content per
// repository.
func TestPullDoesNotServeCachedBlobsToOtherRepositories(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	good := dockerConfigCredentials(t, reg.Host, reg.Username, reg.Password)
	img, _ := pushPackage(t, newClient(t, Options{}), reg.Host, "private", good)
	pinned := mustRef(t, reg.Host+"/private@"+img.Digest)

	tests := map[string]func(t *testing.T) *Client{
		"memory cache": func(t *testing.T) *Client {
			c := newClient(t, Options{})
			_, err := c.Pull(t.Context(), pinned, good)
			require.NoError(t, err)
			return c
		},
		"cache directory": func(t *testing.T) *Client {
			dir := t.TempDir()
			_, err := newClient(t, Options{CacheDir: dir}).Pull(t.Context(), pinned, good)
			require.NoError(t, err)
			return newClient(t, Options{CacheDir: dir})
		},
	}
	for name, cached := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := cached(t)
			evil, blobRequests := fakeRegistry(t, img.manifest, ocispec.MediaTypeImageManifest)
			a, err := c.Pull(t.Context(), mustRef(t, evil+"/stolen@"+img.Digest), nil)
			assert.Nil(t, a)
			require.Error(t, err)
			assert.ErrorContains(t, err, "not found in "+evil+"/stolen")
			assert.Equal(t, 1, blobRequests(), "the layer is asked of the registry the manifest came from")
		})
	}
}

// TestPullCachedForAnotherCaller counts what a second caller with valid credentials costs: no
// download, and at most one HEAD request to prove its credentials.
func TestPullCachedForAnotherCaller(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	first := dockerConfigCredentials(t, reg.Host, reg.Username, reg.Password)
	img, _ := pushPackage(t, newClient(t, Options{}), reg.Host, "shared", first)
	pinned := mustRef(t, reg.Host+"/shared@"+img.Digest)

	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	a1, err := c.Pull(t.Context(), pinned, first)
	require.NoError(t, err)
	require.Equal(t, 1, counter.count("GET blobs"), "requests: %v", counter.requests)

	// Another pull secret holding the same account: the proof is per credential, not per
	// Credentials value, so it costs nothing.
	second := Credentials(func(context.Context, string) (auth.Credential, error) {
		return auth.Credential{Username: reg.Username, Password: reg.Password}, nil
	})
	before := counter.total()
	a2, err := c.Pull(t.Context(), pinned, second)
	require.NoError(t, err)
	assert.Same(t, a1, a2)
	assert.Equal(t, before, counter.total(), "requests: %v", counter.requests)
	assert.Equal(t, 1, counter.count("GET blobs"))
}

// TestPullCachedForAnotherCredential counts what a caller with another valid credential costs on
// a registry that takes both: one HEAD request, no download.
func TestPullCachedForAnotherCredential(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	name := testenv.Repository(t, "public")
	img, _ := pushPackage(t, newClient(t, Options{}), reg.Host, name, nil)
	pinned := mustRef(t, reg.Host+"/"+name+"@"+img.Digest)

	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	a1, err := c.Pull(t.Context(), pinned, nil)
	require.NoError(t, err)
	require.Equal(t, 1, counter.count("GET blobs"), "requests: %v", counter.requests)

	before := counter.total()
	a2, err := c.Pull(t.Context(), pinned, dockerConfigCredentials(t, reg.Host, "alice", "secret"))
	require.NoError(t, err)
	assert.Same(t, a1, a2)
	assert.Equal(t, []string{"HEAD manifests"}, counter.requests[before:])
	assert.Equal(t, 1, counter.count("GET blobs"))
}

// TestResolveWithinProvesAccess checks the controller's flow, a tag resolved then its digest
// pulled, costs no request beyond the resolution and the download.
func TestResolveWithinProvesAccess(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	img, ref := pushPackage(t, newClient(t, Options{}), reg.Host, testenv.Repository(t, "flow"), nil)

	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	dgst, err := c.ResolveWithin(t.Context(), ref, nil, time.Minute)
	require.NoError(t, err)
	require.Equal(t, img.Digest, dgst)
	_, err = c.Pull(t.Context(), ref.WithDigest(dgst), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"HEAD manifests", "GET manifests", "GET blobs"}, counter.requests)

	// Within the resolution's age, the next reconcile costs nothing.
	before := counter.total()
	dgst, err = c.ResolveWithin(t.Context(), ref, nil, time.Minute)
	require.NoError(t, err)
	_, err = c.Pull(t.Context(), ref.WithDigest(dgst), nil)
	require.NoError(t, err)
	assert.Equal(t, before, counter.total(), "requests: %v", counter.requests)
}

// TestPullAccessProofExpires checks a cached package costs one HEAD request per AccessTTL and
// caller, and one per pull when AccessTTL is negative.
func TestPullAccessProofExpires(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	name := testenv.Repository(t, "expiry")
	img, _ := pushPackage(t, newClient(t, Options{}), reg.Host, name, nil)
	pinned := mustRef(t, reg.Host+"/"+name+"@"+img.Digest)

	tests := map[string]struct {
		ttl     time.Duration
		advance time.Duration
		heads   int
	}{
		"within the default TTL":    {advance: defaultAccessTTL - time.Second, heads: 0},
		"after the default TTL":     {advance: defaultAccessTTL, heads: 1},
		"within a TTL of an hour":   {ttl: time.Hour, advance: 59 * time.Minute, heads: 0},
		"negative TTL: every pull":  {ttl: -1, heads: 1},
		"negative TTL, a second on": {ttl: -1, advance: time.Second, heads: 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			counter := newCountingTransport()
			c := newClient(t, Options{Transport: counter, AccessTTL: tt.ttl})
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			c.access.now = func() time.Time { return now }
			_, err := c.Pull(t.Context(), pinned, nil)
			require.NoError(t, err)
			before := counter.total()
			now = now.Add(tt.advance)
			_, err = c.Pull(t.Context(), pinned, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.heads, counter.total()-before, "requests: %v", counter.requests[before:])
			assert.Equal(t, tt.heads, counter.count("HEAD manifests")-1)
			assert.Equal(t, 1, counter.count("GET blobs"))
		})
	}
}

// TestCallerMirrorProvesNoAccessToSharedContent is the attack through a HostedCluster's own
// mirror (spec.imageContentSources, WithCallerMirrors), run by whoever writes that
// HostedCluster: a registry that answers yes for every digest. Another namespace pulled a
// private package; a Package of the HostedCluster's namespace names it by digest, without
// credentials for its repository. The mirror's yes must get it neither the cached package, nor
// a render or verdict shared through Authorize: a caller mirror proves access only to what is
// read from it.
func TestCallerMirrorProvesNoAccessToSharedContent(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	good := dockerConfigCredentials(t, reg.Host, reg.Username, reg.Password)
	img, _ := pushPackage(t, newClient(t, Options{}), reg.Host, "private", good)
	pinned := mustRef(t, reg.Host+"/private@"+img.Digest)

	c := newClient(t, Options{})
	_, err := c.Pull(t.Context(), pinned, good)
	require.NoError(t, err)

	evil, blobRequests := fakeRegistry(t, img.manifest, ocispec.MediaTypeImageManifest)
	viaEvil := c.WithCallerMirrors([]MirrorSet{{Source: reg.Host, Mirrors: []string{evil}}})
	a, err := viaEvil.Pull(t.Context(), pinned, nil)
	assert.Nil(t, a, "the cached private package was served on a caller mirror's word")
	assert.Error(t, err)
	assert.Equal(t, 1, blobRequests(), "the layer is asked of the mirror that proved access")
	assert.Error(t, viaEvil.Authorize(t.Context(), pinned, nil), "a caller mirror's word proved access to shared renders and verdicts")

	// The owner, with its own credentials, still proves access at the source.
	require.NoError(t, c.Authorize(t.Context(), pinned, good))
}
