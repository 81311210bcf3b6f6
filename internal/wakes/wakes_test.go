package wakes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/receiver"
	"pkgsync.dev/pkgsync/source"
)

// testWakes is RegistryWakes over a fake client holding pkgs, with a clock and timers the test
// moves by hand.
type testWakes struct {
	*RegistryWakes
	now    time.Time
	timers []func()
	events chan event.GenericEvent
}

func newTestWakes(t *testing.T, pkgs ...*v1alpha1.Package) *testWakes {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	b := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&v1alpha1.Package{}, repositoryField, func(o client.Object) []string {
		image, _ := packageFollows(o)
		return followedRepository(image)
	})
	for _, p := range pkgs {
		b = b.WithObjects(p)
	}
	tw := &testWakes{RegistryWakes: NewRegistryWakes(), now: time.Unix(1_000_000, 0), events: make(chan event.GenericEvent, 100)}
	tw.RegistryWakes.now = func() time.Time { return tw.now }
	tw.after = func(d time.Duration, f func()) {
		deadline := tw.now.Add(d)
		tw.timers = append(tw.timers, func() { tw.now = deadline; f() })
	}
	tw.reader = b.Build()
	tw.targets = []wakeTarget{{list: func() client.ObjectList { return &v1alpha1.PackageList{} }, follow: packageFollows, events: tw.events}}
	return tw
}

// notify wakes what n names, as the receiver does for a request naming only n.
func (tw *testWakes) notify(ctx context.Context, n receiver.Notification) bool {
	return tw.Wake(ctx, receiver.Push{Registry: n.Registry, Repository: n.Repository, Tags: map[string]string{n.Tag: n.Digest}})
}

// drain returns the names woken so far.
func (tw *testWakes) drain() []string {
	var names []string
	for {
		select {
		case e := <-tw.events:
			names = append(names, e.Object.GetName())
		default:
			return names
		}
	}
}

func following(name, image, semver string) *v1alpha1.Package {
	return &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1alpha1.PackageSpec{Image: image, Semver: semver}}
}

func TestWakeFollowers(t *testing.T) {
	t.Parallel()
	tw := newTestWakes(t,
		following("v1", "registry.example.com/team/app:v1", ""),
		following("v2", "registry.example.com/team/app:v2", ""),
		following("other-registry", "mirror.example.com:5000/team/app:v1", ""),
		following("range", "registry.example.com/team/app", "^1"),
		following("pinned", "registry.example.com/team/app:v1@sha256:"+repeat64("a"), ""),
		following("other-repo", "registry.example.com/team/other:v1", ""),
	)
	assert.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "v1"}))
	assert.ElementsMatch(t, []string{"v1", "other-registry", "range"}, tw.drain(),
		"a repository path wakes its followers of that tag in every registry, and ranges that accept the tag; a pinned digest follows nothing")

	tw.now = tw.now.Add(coalesceWindow)
	assert.True(t, tw.notify(t.Context(), receiver.Notification{Registry: "mirror.example.com:5000", Repository: "team/app"}))
	assert.ElementsMatch(t, []string{"other-registry"}, tw.drain(), "a registry named wakes followers there only; no tag wakes every tag")

	tw.now = tw.now.Add(coalesceWindow)
	assert.False(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "2.0.0"}))
	assert.Empty(t, tw.drain(), "a tag nobody follows and no range accepts wakes nobody")

	assert.False(t, tw.notify(t.Context(), receiver.Notification{Repository: "nobody/follows", Tag: "v1"}))
	assert.Empty(t, tw.drain())
	assert.Empty(t, tw.requests[requestKey{"nobody/follows", "v1"}], "nothing is kept for a repository nobody follows")
}

// TestWakeCoalesces: a burst costs one wake at once and one at the end of the window, carrying
// every tag the burst named.
func TestWakeCoalesces(t *testing.T) {
	t.Parallel()
	tw := newTestWakes(t, following("v1", "registry.example.com/team/app:v1", ""), following("v2", "registry.example.com/team/app:v2", ""))
	start := tw.now
	n := receiver.Notification{Repository: "team/app", Tag: "v1"}
	require.True(t, tw.notify(t.Context(), n))
	assert.Equal(t, []string{"v1"}, tw.drain(), "the first notification wakes at once")
	for i := range 50 {
		tw.now = tw.now.Add(10 * time.Millisecond)
		if i == 20 {
			n.Tag = "v2"
		}
		require.True(t, tw.notify(t.Context(), n))
	}
	assert.Empty(t, tw.drain(), "the rest of the burst waits for the window's end")
	require.Len(t, tw.timers, 1, "one wake is scheduled for the whole burst")
	tw.timers[0]()
	assert.ElementsMatch(t, []string{"v1", "v2"}, tw.drain(), "one wake at the window's end, for every tag the burst named")
	assert.Equal(t, start.Add(coalesceWindow), tw.requests[requestKey{"team/app", "v2"}].at)

	tw.now = tw.now.Add(coalesceWindow)
	require.True(t, tw.notify(t.Context(), n))
	assert.Equal(t, []string{"v2"}, tw.drain(), "after a quiet window a notification wakes at once again")
}

// TestWakeBound: a wake asks the resources following the repository for a resolution made
// after it, as a reconcile request does; an older one changes nothing.
func TestWakeBound(t *testing.T) {
	t.Parallel()
	tw := newTestWakes(t, following("v1", "registry.example.com/team/app:v1", ""), following("range", "registry.example.com/team/app", "^1"))
	ref, err := source.ParseReference("registry.example.com/team/app:v1")
	require.NoError(t, err)
	interval := 10 * time.Minute
	assert.Equal(t, interval/2, tw.Bound(ref, false, interval/2, tw.now), "no wake, no change")
	var observed []time.Duration
	tw.Observe = func(d time.Duration) { observed = append(observed, d) }

	woken := tw.now
	require.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "v1"}))
	now := woken.Add(300 * time.Millisecond)
	assert.Equal(t, 300*time.Millisecond, tw.Bound(ref, false, interval/2, now), "a resolution made after the wake")
	assert.Equal(t, 300*time.Millisecond, tw.Bound(ref, true, interval/2, now), "for a range too")
	assert.Zero(t, tw.Bound(ref, false, 0, now), "a stricter rule stays")
	other := ref
	other.Tag = "v9"
	assert.Equal(t, interval/2, tw.Bound(other, false, interval/2, now), "another tag is not woken")

	tw.Resolved(ref, false, "sha256:any", now)
	tw.Resolved(ref, false, "sha256:any", now.Add(time.Second))
	assert.Equal(t, []time.Duration{300 * time.Millisecond}, observed, "the first resolution after a wake is observed, once")

	assert.Equal(t, interval/2, tw.Bound(ref, false, interval/2, woken.Add(interval)), "an old wake changes nothing")
	var none *RegistryWakes
	assert.Equal(t, interval/2, none.Bound(ref, false, interval/2, now), "without wakes nothing changes")
	none.Resolved(ref, false, "sha256:any", now)
}

func repeat64(s string) string {
	out := ""
	for range 64 {
		out += s
	}
	return out
}

// TestWakeRechecks: Distribution notifies before it moves the tag. A resolution that does not
// show the digest the notification named looks again a window later, maxRechecks times at
// most; one that shows it ends the wake. The digest is never used otherwise.
func TestWakeRechecks(t *testing.T) {
	t.Parallel()
	tw := newTestWakes(t, following("v1", "registry.example.com/team/app:v1", ""))
	ref, err := source.ParseReference("registry.example.com/team/app:v1")
	require.NoError(t, err)
	var observed int
	tw.Observe = func(time.Duration) { observed++ }
	pushed, old := "sha256:"+repeat64("b"), "sha256:"+repeat64("a")

	require.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "v1", Digest: pushed}))
	assert.Equal(t, []string{"v1"}, tw.drain())
	tw.Resolved(ref, false, old, tw.now)
	tw.Resolved(ref, false, old, tw.now)
	require.Len(t, tw.timers, 1, "one look again, however many followers saw the old digest")
	tw.now = tw.now.Add(coalesceWindow)
	tw.timers[0]()
	assert.Equal(t, []string{"v1"}, tw.drain(), "woken again")
	tw.Resolved(ref, false, pushed, tw.now)
	assert.Equal(t, 1, observed, "the resolution that shows the pushed digest is observed")
	tw.Resolved(ref, false, pushed, tw.now)
	assert.Len(t, tw.timers, 1, "done")

	// A digest the registry never shows costs maxRechecks more wakes.
	tw.now = tw.now.Add(coalesceWindow)
	require.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "v1", Digest: "sha256:" + repeat64("f")}))
	wakes, next := len(tw.drain()), len(tw.timers)
	for {
		tw.Resolved(ref, false, pushed, tw.now)
		if len(tw.timers) == next {
			break
		}
		tw.now = tw.now.Add(coalesceWindow)
		tw.timers[next]()
		next++
		wakes += len(tw.drain())
	}
	assert.Equal(t, 1+maxRechecks, wakes, "the notification's wake and maxRechecks more")
	assert.Equal(t, 1, observed, "never observed: the digest never showed")
}

// TestWakesForgotten: what a wake keeps (its time, per repository and tag) is let go once it
// can no longer matter, so notifications of ever new tags (a preview environment per build,
// each a Package following its own tag) do not grow the controller's memory forever.
func TestWakesForgotten(t *testing.T) {
	t.Parallel()
	var pkgs []*v1alpha1.Package
	for i := range 50 {
		pkgs = append(pkgs, following(fmt.Sprintf("build-%d", i), fmt.Sprintf("registry.example.com/team/app:build-%d", i), ""))
	}
	tw := newTestWakes(t, pkgs...)
	for i := range 50 {
		tw.now = tw.now.Add(wakeMemory / 50)
		require.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: fmt.Sprintf("build-%d", i)}))
		tw.drain()
	}
	tw.now = tw.now.Add(wakeMemory)
	require.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "build-49"}))
	tw.mu.Lock()
	defer tw.mu.Unlock()
	assert.Len(t, tw.requests, 1, "only the wake that can still matter is kept")
	assert.Len(t, tw.repos, 1)
}

// TestWakeListsOncePerWindow: within a repository's coalescing window nothing is listed, however
// many notifications name it; the wake at the window's end lists once for all of them. A burst
// naming more than maxPendingTags tags wakes every follower of the repository then, so that
// matching ranges against the tags stays bounded. A repository's followers are listed once per
// window also when none follows the tag named.
func TestWakeListsOncePerWindow(t *testing.T) {
	t.Parallel()
	tw := newTestWakes(t, following("v1", "registry.example.com/team/app:v1", ""), following("other", "registry.example.com/team/app:other", ""),
		following("range", "registry.example.com/team/app", "^1"))
	counter := &countingLists{Reader: tw.reader}
	tw.reader = counter
	require.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "v1"}))
	assert.Equal(t, 1, counter.take(), "a wake outside the window lists once")
	assert.ElementsMatch(t, []string{"v1", "range"}, tw.drain())

	for i := range 10 * maxPendingTags {
		tw.now = tw.now.Add(time.Millisecond)
		assert.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: fmt.Sprintf("build-%d", i)}))
	}
	assert.Zero(t, counter.take(), "nothing is listed within the window")
	require.Len(t, tw.timers, 1)
	tw.timers[0]()
	assert.Equal(t, 1, counter.take(), "the wake at the window's end lists once")
	assert.ElementsMatch(t, []string{"v1", "other", "range"}, tw.drain(), "more tags than maxPendingTags wake every follower")

	// A tag nobody follows, of a repository that has followers, starts a window too.
	tw.now = tw.now.Add(coalesceWindow)
	assert.False(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "2.0.0"}), "nobody follows the tag")
	assert.Equal(t, 1, counter.take())
	assert.True(t, tw.notify(t.Context(), receiver.Notification{Repository: "team/app", Tag: "2.0.0"}))
	assert.Zero(t, counter.take(), "nothing is listed within the window it started")
}

// packageFollows is what a Package follows: its image and semver range.
func packageFollows(o client.Object) (image, semver string) {
	p := o.(*v1alpha1.Package)
	return p.Spec.Image, p.Spec.Semver
}
