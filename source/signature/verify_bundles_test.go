package signature

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// attachKeyed signs subjectDigest with a fresh key in cosign 3's bundle format, attaches the
// bundle to digest in ref's repository and returns the public key.
func attachKeyed(t *testing.T, ref source.Reference, digest, subjectDigest, predicateType string) []byte {
	t.Helper()
	b, pub, err := testenv.SignImageWithKey(ref.Name(), subjectDigest, predicateType)
	require.NoError(t, err)
	_, err = testenv.AttachBundle(t.Context(), ref.Registry, ref.Repository, digest, b, predicateType)
	require.NoError(t, err)
	return pub
}

// Signatures made with a key as cosign 3 stores them, sigstore bundles referring to the image,
// verify with that key; another key, a bundle about another digest and an attestation do not.
func TestVerifyKeyedBundles(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	ctx := t.Context()
	img, ref := pushPackage(t, c, reg.Host, testenv.Repository(t, "bundled"), nil)
	_, otherPub := newKey(t)

	pub := attachKeyed(t, ref, img.Digest, img.Digest, SignPredicateType)
	v, err := Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"other.pub": otherPub, "cosign.pub": pub}), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, v.Digest)
	assert.Equal(t, "cosign.pub", v.Key)
	assert.NotEmpty(t, v.Signature.Digest, "the bundle's manifest")

	_, err = Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"other.pub": otherPub}), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid)
	assert.ErrorContains(t, err, "bundle 1 (")
	assert.ErrorContains(t, err, "[other.pub]")

	otherRef := mustRef(t, reg.Host+"/"+testenv.Repository(t, "bundled-other")+":v1")
	other := pushOther(t, c, otherRef, "other: true\n")
	pub = attachKeyed(t, otherRef, other, img.Digest, SignPredicateType)
	_, err = Verify(ctx, c, otherRef, mustKeys(t, map[string][]byte{"cosign.pub": pub}), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid, "a statement about another digest")

	attestedRef := mustRef(t, reg.Host+"/"+testenv.Repository(t, "bundled-attested")+":v1")
	attested := pushOther(t, c, attestedRef, "attested: true\n")
	pub = attachKeyed(t, attestedRef, attested, attested, "https://slsa.dev/provenance/v1")
	_, err = Verify(ctx, c, attestedRef, mustKeys(t, map[string][]byte{"cosign.pub": pub}), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid, "an attestation")
	assert.ErrorContains(t, err, "not a signature")

	unsignedRef := mustRef(t, reg.Host+"/"+testenv.Repository(t, "bundled-unsigned")+":v1")
	pushOther(t, c, unsignedRef, "unsigned: true\n")
	_, err = Verify(ctx, c, unsignedRef, mustKeys(t, map[string][]byte{"cosign.pub": pub}), nil)
	require.ErrorIs(t, err, ErrNoSignature)
	assert.ErrorContains(t, err, "no sigstore bundle refers to the image")
}

// A registry without the referrers API: the bundle is attached and found through the referrers
// tag schema (an index tagged sha256-HEX), as cosign and oras fall back to.
func TestBundlesThroughReferrersTagSchema(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	target, err := url.Parse(reg.URL())
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		paths []string
	)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// The registry's upload locations then name the proxy.
			r.Out.Host = r.In.Host
		},
		// A registry without the API does not acknowledge a manifest's subject either.
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("OCI-Subject")
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if strings.Contains(r.URL.Path, "/referrers/") {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	c := newClient(t, source.Options{})
	name := testenv.Repository(t, "fallback")
	img, ref := pushPackage(t, c, host, name, nil)
	pub := attachKeyed(t, ref, img.Digest, img.Digest, SignPredicateType)
	v, err := Verify(t.Context(), c, ref, mustKeys(t, map[string][]byte{"cosign.pub": pub}), nil)
	require.NoError(t, err)
	assert.Equal(t, "cosign.pub", v.Key)

	schemaTag := "GET /v2/" + name + "/manifests/" + strings.Replace(img.Digest, ":", "-", 1)
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, paths, schemaTag, "the referrers tag was read: %v", paths)
}
