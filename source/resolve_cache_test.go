package source

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

func TestResolveWithin(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	pusher := newClient(t, Options{})
	v1, ref := pushPackage(t, pusher, reg.Host, testenv.Repository(t, "fleet"), nil)

	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.resolutions.now = func() time.Time { return now }
	heads := func() int { return counter.count("HEAD manifests") }

	// Many resources of one tag resolving at once: one request.
	const n = 20
	digests := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, err := c.ResolveWithin(t.Context(), ref, nil, time.Minute)
			assert.NoError(t, err)
			digests[i] = d
		})
	}
	wg.Wait()
	for _, d := range digests {
		assert.Equal(t, v1.Digest, d)
	}
	// Callers that came after the flight ended found its answer in the cache.
	assert.Equal(t, 1, heads(), "requests: %v", counter.requests)
	assert.Equal(t, 1, counter.total(), "requests: %v", counter.requests)

	// The tag moves; within maxAge the remembered digest answers without a request.
	v2, err := Build(testenv.PackageDir(t), BuildOptions{Version: "2.0.0"})
	require.NoError(t, err)
	require.NotEqual(t, v1.Digest, v2.Digest)
	_, err = pusher.Push(t.Context(), v2, []Reference{ref}, nil)
	require.NoError(t, err)
	now = now.Add(59 * time.Second)
	got, err := c.ResolveWithin(t.Context(), ref, nil, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, v1.Digest, got)
	assert.Equal(t, 1, heads())

	// A caller with a shorter maxAge asks again and refreshes the cache for everyone.
	got, err = c.ResolveWithin(t.Context(), ref, nil, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, v2.Digest, got)
	assert.Equal(t, 2, heads())
	got, err = c.ResolveWithin(t.Context(), ref, nil, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, v2.Digest, got)
	assert.Equal(t, 2, heads())

	// Once maxAge has passed, the next call asks.
	now = now.Add(time.Minute)
	_, err = c.ResolveWithin(t.Context(), ref, nil, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 3, heads())

	// Zero maxAge always asks.
	for range 2 {
		_, err = c.ResolveWithin(t.Context(), ref, nil, 0)
		require.NoError(t, err)
	}
	assert.Equal(t, 5, heads())

	// A pinned reference answers without a request.
	got, err = c.ResolveWithin(t.Context(), ref.WithDigest(v1.Digest), nil, 0)
	require.NoError(t, err)
	assert.Equal(t, v1.Digest, got)
	assert.Equal(t, 5, heads())
}

func TestResolveWithinKeysByCredentialAndTag(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	name := testenv.Repository(t, "keys")
	_, ref := pushPackage(t, newClient(t, Options{}), reg.Host, name, nil)
	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	basic := func(user string) Credentials {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":secret"))
		creds, err := CredentialsFromDockerConfigJSON([]byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, auth)))
		require.NoError(t, err)
		return creds
	}

	// The registry takes anonymous requests, so every credential resolves, each on its own.
	for _, creds := range []Credentials{nil, basic("alice"), basic("bob"), basic("alice")} {
		_, err := c.ResolveWithin(t.Context(), ref, creds, time.Hour)
		require.NoError(t, err)
	}
	assert.Equal(t, 3, counter.count("HEAD manifests"), "one per distinct credential: %v", counter.requests)

	// A failed resolution is not remembered.
	missing := mustRef(t, reg.Host+"/"+name+":missing")
	for range 2 {
		_, err := c.ResolveWithin(t.Context(), missing, nil, time.Hour)
		require.ErrorContains(t, err, "tag missing not found in "+reg.Host+"/"+name)
	}
	assert.Equal(t, 5, counter.count("HEAD manifests"), "requests: %v", counter.requests)

	// A caller already cancelled gets its own error and sends nothing.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.ResolveWithin(ctx, mustRef(t, reg.Host+"/"+name+":other"), nil, time.Hour)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 5, counter.count("HEAD manifests"), "requests: %v", counter.requests)
}
