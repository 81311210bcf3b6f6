package source

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	img, err := Build(testenv.PackageDir(t), BuildOptions{Version: "1.0.0"})
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
	dir := testenv.PackageDir(t)
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
