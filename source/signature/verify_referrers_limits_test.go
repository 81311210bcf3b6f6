package signature

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
)

// referrerPager answers the referrers API with pages of descriptors, linking a next page for up
// to pages pages: a registry that lists a digest's referrers without end.
type referrerPager struct {
	pages  int
	page   func(i int) []ocispec.Descriptor
	pad    int
	served atomic.Int64
}

func (p *referrerPager) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !strings.HasPrefix(req.URL.Path, "/v2/attack/referrers/") {
		http.NotFound(w, req)
		return
	}
	i := int(p.served.Add(1)) - 1
	if i+1 < p.pages {
		w.Header().Set("Link", fmt.Sprintf(`<%s?page=%d>; rel="next"`, req.URL.Path, i+1))
	}
	w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
	_, _ = w.Write([]byte(strings.Repeat(" ", p.pad)))
	_ = json.NewEncoder(w).Encode(ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: p.page(i)})
}

// bundleDescriptors are n referrers of the bundle type, signatures when sign.
func bundleDescriptors(n int, sign bool) []ocispec.Descriptor {
	out := make([]ocispec.Descriptor, n)
	for i := range out {
		out[i] = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: BundleMediaType, Size: 100,
			Digest: digest.FromString(fmt.Sprint(i))}
		if sign {
			out[i].Annotations = map[string]string{BundlePredicateTypeAnnotation: SignPredicateType}
		}
	}
	return out
}

// The referrers of a digest are the registry's to list: the listing reads a bounded number of
// pages of bounded size, and keeps a bounded number of bundles.
func TestReferrersListingBounded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		srv     *referrerPager
		message string
	}{{
		name:    "a page over the bound",
		srv:     &referrerPager{pages: 1, pad: 1 << 20, page: func(int) []ocispec.Descriptor { return bundleDescriptors(1, true) }},
		message: "the referrers listing read a response over 524288 bytes",
	}, {
		name:    "endless pages",
		srv:     &referrerPager{pages: 100, page: func(int) []ocispec.Descriptor { return bundleDescriptors(10, false) }},
		message: "exceeded 4 pages",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tc.srv)
			t.Cleanup(srv.Close)
			c := newClient(t, source.Options{})
			repo := repositoryOf(t, c, mustRef(t, strings.TrimPrefix(srv.URL, "http://")+"/attack"))
			_, _, err := listBundles(t.Context(), repo, digest.FromString("image"))
			require.ErrorIs(t, err, source.ErrLimit)
			assert.ErrorContains(t, err, tc.message)
			assert.LessOrEqual(t, tc.srv.served.Load(), int64(maxReferrerPages))
		})
	}

	// Many referrers: maxBundles are kept, signatures first, and the rest is said to be there.
	srv := httptest.NewServer(&referrerPager{pages: 3, page: func(i int) []ocispec.Descriptor { return bundleDescriptors(1000, i == 2) }})
	t.Cleanup(srv.Close)
	c := newClient(t, source.Options{})
	repo := repositoryOf(t, c, mustRef(t, strings.TrimPrefix(srv.URL, "http://")+"/attack"))
	bundles, more, err := listBundles(t.Context(), repo, digest.FromString("image"))
	require.NoError(t, err)
	assert.True(t, more)
	require.Len(t, bundles, maxBundles)
	assert.Equal(t, SignPredicateType, bundles[0].Annotations[BundlePredicateTypeAnnotation], "signatures first")
}

// A registry that trickles the signature manifest, a byte at a time, holds a verification no
// longer than its bound, whatever deadline the caller has (a fleet's reconcile has none).
func TestVerifyBoundedInTime(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.Contains(req.URL.Path, "/manifests/") {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-req.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, source.Options{})
	_, pub := newKey(t)
	ref := mustRef(t, strings.TrimPrefix(srv.URL, "http://")+"/attack@"+digest.FromString("image").String())
	start := time.Now()
	_, err := verifyWithin(t.Context(), c, ref, mustKeys(t, map[string][]byte{"cosign.pub": pub}), nil, 300*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 10*time.Second)
}
