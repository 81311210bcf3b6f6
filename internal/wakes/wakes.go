package wakes

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"pkgsync.dev/pkgsync/internal/receiver"
	"pkgsync.dev/pkgsync/source"
)

// repositoryField indexes Packages, ClusterPackages and HostedClusterPackages by the repository
// their image follows by tag: its path (team/package) and its registry and path
// (registry.example.com/team/package). Images pinned to a digest follow nothing.
const repositoryField = "pkgsync.dev/followed-repository"

// coalesceWindow is the shortest time between two wakes of one repository: a burst of
// notifications (a push of many tags, a sender that retries) costs one resolution at the start
// of the window and one at its end, whatever its size.
const coalesceWindow = time.Second

// wakeBuffer bounds the wakes queued for one kind before its controller takes them; a wake
// that does not fit is dropped (logged), and the resource's interval covers it.
const wakeBuffer = 4096

// RegistryWakes turns registry notifications into reconciles of the resources that follow the
// repository (and tag, or a semver range accepting it), and into the rule that those reconciles
// resolve the tag afresh: a resolution made after the notification, as a reconcile request
// (requestedAt) asks for one made after the request. A notification wakes, and is trusted for
// nothing else: the digest is resolved from the registry by the reconcile. A repository nobody
// follows costs an index lookup and nothing of any registry.
//
// Setup wires it to the controllers (Options.Wakes); the receiver calls Wake.
type RegistryWakes struct {
	reader  client.Reader
	targets []wakeTarget
	// Observe is told the time from a notification to the first resolution made for it.
	Observe func(time.Duration)
	now     func() time.Time
	after   func(time.Duration, func())

	mu sync.Mutex
	// repos coalesces wakes per notification key (PATH or HOST/PATH).
	repos map[string]*repoWake
	// requests holds when each followed repository was last woken, per tag followed ("" for
	// followers by semver range): the time a resolution must be newer than.
	requests map[requestKey]*wakeRequest
}

type repoWake struct {
	last    time.Time
	pending bool
	// tags gathered for the pending wake ("" is every tag), with their hints.
	tags map[string]wakeHint
}

// wakeHint is what a wake expects a resolution of its tag to show: the digest Distribution said
// it pushed (empty when none), and how many times it was looked for again.
type wakeHint struct {
	digest   string
	rechecks int
}

// maxRechecks bounds how many more times a wake looks for the digest its notification named,
// a coalesceWindow apart: Distribution sends its push event before it moves the tag, so the
// first resolution can still see the old digest. A sender naming a digest the registry never
// shows costs this many more resolutions, no more.
const maxRechecks = 3

// wakeMemory is how long a wake is kept: long after the reconciles it asked for resolved the
// tag afresh (the resolutions they shared then cover it). Older wakes are let go, so notifications
// of ever new tags or repositories (a Package per build, following its own tag) do not grow the
// controller's memory for good.
const wakeMemory = time.Hour

type requestKey struct{ repository, tag string }

// wakeRequest is the last wake of a repository and tag.
type wakeRequest struct {
	key  requestKey
	at   time.Time
	hint wakeHint
	// done: a resolution showed the hinted digest (or there was none) and was observed.
	done bool
	// recheck: a wake looking again is scheduled.
	recheck bool
}

// wakeTarget is a kind that follows repositories.
type wakeTarget struct {
	list   func() client.ObjectList
	follow func(client.Object) (image, semver string)
	events chan event.GenericEvent
}

// NewRegistryWakes makes what registry notifications wake; pass it in Options.Wakes.
func NewRegistryWakes() *RegistryWakes {
	return &RegistryWakes{
		now: time.Now, after: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		repos: map[string]*repoWake{}, requests: map[requestKey]*wakeRequest{},
	}
}

// followedRepository is the index function of repositoryField.
func followedRepository(image string) []string {
	ref, err := source.ParseReference(image)
	if err != nil || ref.Digest != "" {
		return nil
	}
	return []string{ref.Repository, ref.Name()}
}

// Watch indexes a kind by the repository it follows and returns the source of its wakes, for
// the kind's controller.
func (w *RegistryWakes) Watch(ctx context.Context, mgr ctrl.Manager, obj client.Object, list func() client.ObjectList,
	follow func(client.Object) (image, semver string)) (crsource.Source, error) {
	if err := mgr.GetFieldIndexer().IndexField(ctx, obj, repositoryField, func(o client.Object) []string {
		image, _ := follow(o)
		return followedRepository(image)
	}); err != nil {
		return nil, fmt.Errorf("index %T by repository: %w", obj, err)
	}
	w.reader = mgr.GetClient()
	events := make(chan event.GenericEvent, wakeBuffer)
	w.targets = append(w.targets, wakeTarget{list: list, follow: follow, events: events})
	return crsource.Channel(events, &handler.EnqueueRequestForObject{}), nil
}

// maxPendingTags bounds the tags a repository's coalesced wake gathers: a burst naming more (a
// key holder's requests, MaxNotifications tags each, many times a second) wakes every follower
// of the repository at the window's end instead, so that matching the followers' ranges costs
// no more than this many tags each, however long the burst.
const maxPendingTags = 64

// Wake wakes the resources following the push's repository and one of its tags, at once or,
// within coalesceWindow of the repository's last wake, once at the window's end. It reports
// whether any resource follows one of the tags; within the window, where nothing is listed,
// whether any followed the repository when the window started.
func (w *RegistryWakes) Wake(ctx context.Context, p receiver.Push) bool {
	tags := make(map[string]wakeHint, len(p.Tags))
	for tag, digest := range p.Tags {
		tags[tag] = wakeHint{digest: digest}
	}
	return w.wake(ctx, p.Key(), tags)
}

// wake looks at the repository's coalescing window before it lists anything: within it, the
// tags join the wake pending at its end (one list then, for the whole burst); outside it, the
// followers are listed once and woken at once, and the window starts, even when none follows
// these tags (so that a flood naming a tag nobody follows of a repository many follow costs a
// list per window too). A request costs one list per repository (and kind) at most, a
// repository listed within the window none. A repository nobody follows starts no window: it
// is kept nowhere, and its list is an index lookup that copies nothing.
func (w *RegistryWakes) wake(ctx context.Context, key string, tags map[string]wakeHint) bool {
	tags = capTags(tags)
	w.mu.Lock()
	coalesced := w.coalesceLocked(ctx, key, tags, w.now())
	w.mu.Unlock()
	if coalesced {
		return true
	}
	followers, followed := w.followers(ctx, key, tags)
	if !followed {
		return false
	}
	w.mu.Lock()
	now := w.now()
	// Another request may have started the window while this one listed: this one then joins
	// it like any other.
	if w.coalesceLocked(ctx, key, tags, now) {
		w.mu.Unlock()
		return true
	}
	r := w.repos[key]
	if r == nil {
		r = &repoWake{}
		w.repos[key] = r
	}
	r.last = now
	w.mu.Unlock()
	if len(followers) == 0 {
		return false
	}
	w.fire(ctx, key, tags, followers, now)
	return true
}

// coalesceLocked adds tags to the wake pending at the end of the repository's window,
// scheduling it if none is, when the repository was woken within coalesceWindow of now; it
// reports whether it did.
func (w *RegistryWakes) coalesceLocked(ctx context.Context, key string, tags map[string]wakeHint, now time.Time) bool {
	r := w.repos[key]
	if r == nil || !r.pending && now.Sub(r.last) >= coalesceWindow {
		return false
	}
	if r.tags == nil {
		r.tags = map[string]wakeHint{}
	}
	maps.Copy(r.tags, tags)
	r.tags = capTags(r.tags)
	if !r.pending {
		r.pending = true
		w.after(r.last.Add(coalesceWindow).Sub(now), func() {
			w.mu.Lock()
			at := w.now()
			tags := r.tags
			r.last, r.tags, r.pending = at, nil, false
			w.mu.Unlock()
			ctx := context.WithoutCancel(ctx)
			followers, _ := w.followers(ctx, key, tags)
			w.fire(ctx, key, tags, followers, at)
		})
	}
	return true
}

// capTags is tags, or every tag ("") when they are more than maxPendingTags.
func capTags(tags map[string]wakeHint) map[string]wakeHint {
	if len(tags) > maxPendingTags {
		return map[string]wakeHint{"": {}}
	}
	return tags
}

// follower is a resource that follows a repository, with the tag it follows ("" for a range).
type follower struct {
	target *wakeTarget
	obj    client.Object
	tag    string
}

// followers lists the resources that follow repository key and one of tags ("" is every tag),
// and reports whether any resource follows the repository at all.
func (w *RegistryWakes) followers(ctx context.Context, key string, tags map[string]wakeHint) (out []follower, followed bool) {
	for i := range w.targets {
		t := &w.targets[i]
		list := t.list()
		if err := w.reader.List(ctx, list, client.MatchingFields{repositoryField: key}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list followers of a repository", "repository", key)
			continue
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			continue
		}
		followed = followed || len(items) > 0
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok {
				continue
			}
			image, semver := t.follow(obj)
			ref, err := source.ParseReference(image)
			if err != nil {
				continue
			}
			if semver != "" {
				if acceptsAny(semver, tags) {
					out = append(out, follower{target: t, obj: obj})
				}
				continue
			}
			_, anyTag := tags[""]
			if _, tagged := tags[ref.Tag]; anyTag || tagged {
				out = append(out, follower{target: t, obj: obj, tag: ref.Tag})
			}
		}
	}
	return out, followed
}

// acceptsAny reports whether a version range accepts one of tags ("" is every tag).
func acceptsAny(semver string, tags map[string]wakeHint) bool {
	rng, err := source.ParseVersionRange(semver)
	if err != nil {
		return false
	}
	for tag := range tags {
		if tag == "" {
			return true
		}
		if _, ok := rng.Highest([]string{tag}); ok {
			return true
		}
	}
	return false
}

// fire records the wake at time at for followers, listed for key and tags, and enqueues them.
func (w *RegistryWakes) fire(ctx context.Context, key string, tags map[string]wakeHint, followers []follower, at time.Time) {
	w.mu.Lock()
	w.forgetLocked(at)
	for _, f := range followers {
		rk := requestKey{repository: key, tag: f.tag}
		// A range's followers resolve whichever tag is highest: no digest is expected of them.
		var hint wakeHint
		if f.tag != "" {
			hint = tags[f.tag]
		}
		w.requests[rk] = &wakeRequest{key: rk, at: at, hint: hint}
	}
	w.mu.Unlock()
	for _, f := range followers {
		select {
		case f.target.events <- event.GenericEvent{Object: f.obj}:
		default:
			ctrl.LoggerFrom(ctx).Info("wake dropped: too many queued; the resource's interval covers it",
				"namespace", f.obj.GetNamespace(), "name", f.obj.GetName())
		}
	}
}

// forgetLocked lets go of the wakes older than wakeMemory, and of the repositories whose
// coalescing window is long over with nothing pending.
func (w *RegistryWakes) forgetLocked(now time.Time) {
	for k, r := range w.requests {
		if now.Sub(r.at) >= wakeMemory {
			delete(w.requests, k)
		}
	}
	for k, r := range w.repos {
		if !r.pending && now.Sub(r.last) >= wakeMemory {
			delete(w.repos, k)
		}
	}
}

// Bound narrows maxAge, how old a tag resolution may be for a resource following ref (by a
// range when byRange), to the time since the repository's last wake: a wake asks for a
// resolution made after it, as a reconcile request does, and a fleet following one tag then
// shares one. Nil wakes change nothing.
func (w *RegistryWakes) Bound(ref source.Reference, byRange bool, maxAge time.Duration, now time.Time) time.Duration {
	if r := w.latest(ref, byRange); r != nil {
		return min(maxAge, max(now.Sub(r.at), 0))
	}
	return maxAge
}

// Resolved is told that a resource following ref resolved it to digest (after bound). The
// first resolution that shows the digest the wake expected (any, when it expected none) is
// observed; one that does not yet schedules a wake to look again, maxRechecks times at most.
func (w *RegistryWakes) Resolved(ref source.Reference, byRange bool, digest string, now time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	r := w.latestLocked(ref, byRange)
	if r == nil || r.done {
		w.mu.Unlock()
		return
	}
	if r.hint.digest == "" || r.hint.digest == digest {
		r.done = true
		w.mu.Unlock()
		if w.Observe != nil {
			w.Observe(now.Sub(r.at))
		}
		return
	}
	if r.recheck || r.hint.rechecks >= maxRechecks {
		w.mu.Unlock()
		return
	}
	r.recheck = true
	key, hint := r.key, wakeHint{digest: r.hint.digest, rechecks: r.hint.rechecks + 1}
	w.mu.Unlock()
	w.after(coalesceWindow, func() { w.wake(context.Background(), key.repository, map[string]wakeHint{key.tag: hint}) })
}

func (w *RegistryWakes) latest(ref source.Reference, byRange bool) *wakeRequest {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latestLocked(ref, byRange)
}

// latestLocked is the latest wake of ref's repository, named by path or by registry and path.
func (w *RegistryWakes) latestLocked(ref source.Reference, byRange bool) *wakeRequest {
	tag := ref.Tag
	if byRange {
		tag = ""
	}
	var latest *wakeRequest
	for _, key := range []string{ref.Repository, ref.Name()} {
		if r := w.requests[requestKey{repository: key, tag: tag}]; r != nil && (latest == nil || r.at.After(latest.at)) {
			latest = r
		}
	}
	return latest
}
