package source

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tagPager is a registry that answers every tag listing page with a next link, for up to
// pages pages: what a registry run by an attacker does to make a listing endless. page builds
// the body of page i. It counts the bytes it sent.
type tagPager struct {
	pages  int
	page   func(i int) []byte
	sent   atomic.Int64
	served atomic.Int64
}

func (p *tagPager) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/v2/":
	case "/v2/attack/tags/list":
		i := int(p.served.Add(1)) - 1
		if i+1 < p.pages {
			w.Header().Set("Link", fmt.Sprintf(`</v2/attack/tags/list?n=1000&last=p%d>; rel="next"`, i))
		}
		w.Header().Set("Content-Type", "application/json")
		body := p.page(i)
		n, _ := w.Write(body)
		p.sent.Add(int64(n))
	default:
		http.NotFound(w, req)
	}
}

// tagsPage is a tag listing page holding tags.
func tagsPage(tags ...string) []byte {
	data, _ := json.Marshal(map[string]any{"name": "attack", "tags": tags})
	return data
}

// A registry that answers a tag listing with endless pages, huge tags or huge pages gets an
// error wrapping ErrLimit that names the bound, after reading little more than the bound: it
// once drove the controller to 12 GiB (2066 pages of one 4 MiB tag each).
func TestTagsListingBoundedInBytes(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	cases := []struct {
		name string
		srv  *tagPager
		// set shrinks the bounds, so that the case needs few requests.
		set     func(*tagListCache)
		message string
		maxSent int64
	}{{
		// The attack as it was found, against the default bounds: refused at the first tag.
		name:    "pages of one huge tag",
		srv:     &tagPager{pages: 64, page: func(int) []byte { return tagsPage(strings.Repeat("a", 4*mib-64)) }},
		message: "characters, over 128",
		maxSent: 4 * mib,
	}, {
		name:    "one tag over the distribution spec's bound",
		srv:     &tagPager{pages: 1, page: func(int) []byte { return tagsPage("v1", strings.Repeat("a", 129)) }},
		message: "tag of 129 characters, over 128",
		maxSent: 1024,
	}, {
		name:    "endless pages of valid tags",
		srv:     &tagPager{pages: 100, page: func(i int) []byte { return tagsPage(fmt.Sprintf("t%d", i)) }},
		set:     func(c *tagListCache) { c.maxPages = 10 },
		message: "exceeded 10 pages",
		maxSent: 10 * 64,
	}, {
		name: "endless pages with no tags, padded",
		srv: &tagPager{pages: 64, page: func(int) []byte {
			return append([]byte(strings.Repeat(" ", mib-32)), tagsPage()...)
		}},
		message: "more than 16777216 bytes",
		maxSent: 17 * mib,
	}, {
		name:    "one page over the page bound",
		srv:     &tagPager{pages: 1, page: func(int) []byte { return append([]byte(strings.Repeat(" ", 8*mib)), tagsPage("v1")...) }},
		message: "over 4194304 bytes",
		maxSent: 8*mib + 64,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tc.srv)
			t.Cleanup(srv.Close)
			c := newClient(t, Options{})
			if tc.set != nil {
				tc.set(c.tagLists)
			}
			host := strings.TrimPrefix(srv.URL, "http://")
			tags, err := c.Tags(t.Context(), mustRef(t, host+"/attack"), nil)
			require.ErrorIs(t, err, ErrLimit, "listed %d tags", len(tags))
			assert.ErrorContains(t, err, tc.message)
			assert.ErrorContains(t, err, "list tags of "+host+"/attack")
			// What the server wrote is not all read: the bound is on what the client reads.
			assert.LessOrEqual(t, tc.srv.sent.Load(), tc.maxSent+tc.srv.served.Load()*256, "pages served: %d", tc.srv.served.Load())
		})
	}
}

// Listings are remembered up to a number of bytes, not of entries: 1024 listings of 10000 tags
// of 128 characters would be more than a gigabyte.
func TestTagListCacheBoundedInBytes(t *testing.T) {
	t.Parallel()
	c := newTagListCache()
	c.maxBytes = 10 << 10
	tags := make([]string, 20)
	for i := range tags {
		tags[i] = strings.Repeat("x", 100) + fmt.Sprint(i)
	}
	size := tagListSize("repo-0", tags)
	require.Greater(t, size, int64(2<<10))
	for i := range 10 {
		c.add(fmt.Sprintf("repo-%d", i), tagList{tags: tags})
	}
	assert.LessOrEqual(t, c.bytes, c.maxBytes)
	assert.Less(t, c.entries.Len(), 10, "the oldest listings were let go")
	_, ok := c.get("repo-9")
	assert.True(t, ok, "the newest listing is kept")
	_, ok = c.get("repo-0")
	assert.False(t, ok, "the oldest listing is let go")

	// Replacing a listing does not count it twice.
	used := c.bytes
	c.add("repo-9", tagList{tags: tags})
	assert.Equal(t, used, c.bytes)

	// A listing larger than the whole cache is not kept.
	c.add("huge", tagList{tags: make([]string, 1000)})
	_, ok = c.get("huge")
	assert.False(t, ok)
	assert.LessOrEqual(t, c.bytes, c.maxBytes)
}
