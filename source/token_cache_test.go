package source

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// tokenRegistry asks for a bearer token from its own realm and hands out tokens of tokenBytes.
// With newScopes, each challenge names a scope never seen before, which oras adds to the key
// its cache keeps the token under.
type tokenRegistry struct {
	t          *testing.T
	srv        *httptest.Server
	tokenBytes int
	newScopes  bool
	challenges atomic.Int64
	issued     atomic.Int64
}

func (r *tokenRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/token" {
		n := r.issued.Add(1)
		writeJSON(r.t, w, map[string]string{"token": fmt.Sprintf("tok-%d-%s", n, strings.Repeat("x", r.tokenBytes))})
		return
	}
	if !strings.HasPrefix(req.Header.Get("Authorization"), "Bearer tok-") {
		scope := "repository:attack:pull"
		if r.newScopes {
			scope += fmt.Sprintf(" repository:extra-%d:pull", r.challenges.Add(1))
		}
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="registry",scope=%q`, r.srv.URL+"/token", scope))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
	w.Header().Set("Docker-Content-Digest", digest.FromString("manifest").String())
	w.Header().Set("Content-Length", "8")
}

// The tokens kept are bounded in bytes: a registry that names a new scope in every challenge,
// and answers with large tokens, made oras' cache keep one more on every request.
func TestTokensBoundedInBytes(t *testing.T) {
	t.Parallel()
	reg := &tokenRegistry{t: t, tokenBytes: 100 << 10, newScopes: true}
	reg.srv = httptest.NewServer(reg)
	t.Cleanup(reg.srv.Close)
	c := newClient(t, Options{})
	c.tokens.max = 1 << 20
	ref := mustRef(t, strings.TrimPrefix(reg.srv.URL, "http://")+"/attack:v1")
	for range 30 {
		_, err := c.Resolve(t.Context(), ref, nil)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(30), reg.issued.Load(), "a new scope each time: a new token each time")
	assert.LessOrEqual(t, c.tokens.bytes, c.tokens.max)
	assert.Less(t, c.tokens.tokens.Len(), 11)

	// A registry with stable scopes gets its token asked for once, and reused.
	stable := &tokenRegistry{t: t, tokenBytes: 1 << 10}
	stable.srv = httptest.NewServer(stable)
	t.Cleanup(stable.srv.Close)
	ref = mustRef(t, strings.TrimPrefix(stable.srv.URL, "http://")+"/attack:v1")
	for range 5 {
		_, err := c.Resolve(t.Context(), ref, nil)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), stable.issued.Load())

	// Another credential does not get it.
	other := func(context.Context, string) (auth.Credential, error) {
		return auth.Credential{Username: "u", Password: "p"}, nil
	}
	_, err := c.Resolve(t.Context(), ref, other)
	require.NoError(t, err)
	assert.Equal(t, int64(2), stable.issued.Load())
}
