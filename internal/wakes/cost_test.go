package wakes

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/receiver"
)

// countingLists counts the lists of followers made through it: each one deep-copies every
// follower of the repository out of the cache, the cost issue 41 (3) measured.
type countingLists struct {
	client.Reader
	mu    sync.Mutex
	lists int
}

func (c *countingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.Reader.List(ctx, list, opts...)
}

func (c *countingLists) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.lists
	c.lists = 0
	return n
}

type bearerKeys map[receiver.Source]string

func (k bearerKeys) Key(_ context.Context, s receiver.Source) ([]byte, error) {
	return []byte(k[s]), nil
}

// envelope is a Distribution notification envelope of pushes by tag, grown to MaxBodyBytes:
// event i pushes the tag repository(i):tag(i).
func envelope(repository, tag func(int) string) string {
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for i := 0; ; i++ {
		event := fmt.Sprintf(`{"action":"push","target":{"repository":%q,"tag":%q}}`, repository(i), tag(i))
		if b.Len()+len(event)+3 > receiver.MaxBodyBytes {
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(event)
	}
	b.WriteString("]}")
	return b.String()
}

// TestWakeCostOfOneRequest is the attack of issue 41 (3): whoever holds the distribution key
// posts a 1 MiB envelope (about 15,000 pushes). Each push used to list the repository's
// followers, once per registry the key is bound to, before the coalescing window was looked
// at: tens of thousands of lists, each a deep copy of every follower. What one request costs is
// counted here in lists: one per repository and bound registry at most, nothing for a
// repository already woken within the window, and never more than MaxNotifications
// repositories per request.
func TestWakeCostOfOneRequest(t *testing.T) {
	t.Parallel()
	const followers = 20
	hosts := []string{"a.example.com", "b.example.com"}
	cases := []struct {
		name       string
		body       string
		first      int
		repeated   int
		bodyPrefix string
	}{
		{"one repository, a new tag per event",
			envelope(func(int) string { return "team/app" }, func(i int) string { return fmt.Sprintf("t%d", i) }),
			len(hosts), 0, fmt.Sprintf("first %d of ", receiver.MaxNotifications)},
		{"one repository, one tag, repeated",
			envelope(func(int) string { return "team/app" }, func(int) string { return "v1" }),
			len(hosts), 0, ""},
		{"a new repository per event",
			envelope(func(i int) string { return fmt.Sprintf("team/app-%d", i) }, func(int) string { return "v1" }),
			receiver.MaxNotifications * len(hosts), receiver.MaxNotifications * len(hosts), fmt.Sprintf("first %d of ", receiver.MaxNotifications)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var pkgs []*v1alpha1.Package
			for i := range followers {
				pkgs = append(pkgs, following(fmt.Sprintf("f%d", i), fmt.Sprintf("%s/team/app:t%d", hosts[i%2], i), ""))
			}
			pkgs = append(pkgs, following("range", hosts[0]+"/team/app", ">=0.0.0"))
			tw := newTestWakes(t, pkgs...)
			tw.events = make(chan event.GenericEvent, wakeBuffer)
			tw.targets[0].events = tw.events
			counter := &countingLists{Reader: tw.reader}
			tw.reader = counter
			h := receiver.New(receiver.Options{Keys: bearerKeys{receiver.Distribution: "k"}, Waker: tw,
				Registries: map[receiver.Source][]string{receiver.Distribution: hosts}})

			post := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, receiver.PathPrefix+"distribution", strings.NewReader(c.body))
				req.Header.Set("Authorization", "Bearer k")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			rec := post()
			assert.Equal(t, http.StatusAccepted, rec.Code)
			assert.Contains(t, rec.Body.String(), c.bodyPrefix, "a request cut short says so")
			assert.LessOrEqual(t, counter.take(), c.first, "lists made for one 1 MiB request")
			rec = post()
			assert.Equal(t, http.StatusAccepted, rec.Code)
			assert.LessOrEqual(t, counter.take(), c.repeated, "lists made for the same request again within the coalescing window")
		})
	}
}
