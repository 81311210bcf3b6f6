package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// tracker records when each Package first reaches the state a scenario waits for. It listens
// to a Package informer: the controller's own with -controller inline, the harness's otherwise.
type tracker struct {
	mu   sync.Mutex
	want func(*v1alpha1.Package) bool
	// keys are the Packages (namespace/name) the scenario waits for.
	keys    map[string]bool
	reached map[string]time.Time
	done    chan struct{}
	// latest is the last state seen of every Package, so that expect counts one that got there
	// before the scenario began waiting (with -arrival restart, before the tracker was asked).
	latest map[string]*v1alpha1.Package
}

func newTracker(ctx context.Context, env *environment) (*tracker, error) {
	t := &tracker{want: func(*v1alpha1.Package) bool { return false }, latest: map[string]*v1alpha1.Package{}}
	inf, err := env.ctl.packageInformer(ctx)
	if err != nil {
		return nil, fmt.Errorf("get Package informer: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch Packages: %w", err)
	}
	return t, nil
}

// expect starts a scenario: the returned channel closes once every Package of keys passed want
// (at once when keys is empty).
func (t *tracker) expect(keys map[string]bool, want func(*v1alpha1.Package) bool) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want, t.keys, t.reached, t.done = want, keys, map[string]time.Time{}, make(chan struct{})
	now := time.Now()
	for key := range keys {
		if p, seen := t.latest[key]; seen && want(p) {
			t.reached[key] = now
		}
	}
	if len(t.reached) == len(keys) {
		close(t.done)
	}
	return t.done
}

func (t *tracker) observe(obj any) {
	pkg, ok := obj.(*v1alpha1.Package)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	key := pkg.Namespace + "/" + pkg.Name
	t.latest[key] = pkg
	if t.reached == nil || !t.keys[key] || !t.want(pkg) {
		return
	}
	if _, seen := t.reached[key]; seen {
		return
	}
	t.reached[key] = now
	if len(t.reached) == len(t.keys) {
		close(t.done)
	}
}

// times returns when each Package reached the state, and how many did.
func (t *tracker) times() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.reached))
	for k, v := range t.reached {
		out[k] = v
	}
	return out
}

// readyOn tells whether a Package is Ready with revision applied and, when token is set, has
// handled that reconcile request.
func readyOn(revision, token string) func(*v1alpha1.Package) bool {
	return func(p *v1alpha1.Package) bool {
		if p.Status.LastAppliedRevision != revision || (token != "" && p.Status.LastHandledReconcileAt != token) {
			return false
		}
		c := apimeta.FindStatusCondition(p.Status.Conditions, meta.ReadyCondition)
		return c != nil && c.Status == "True" && p.Status.ObservedGeneration == p.Generation
	}
}

// unavailable tells whether a Package whose hosted cluster is dead is where it should be:
// Ready=False HostedClusterUnavailable and, when token is set, has handled that reconcile request.
func unavailable(token string) func(*v1alpha1.Package) bool {
	return func(p *v1alpha1.Package) bool {
		if token != "" && p.Status.LastHandledReconcileAt != token {
			return false
		}
		c := apimeta.FindStatusCondition(p.Status.Conditions, meta.ReadyCondition)
		return c != nil && c.Status == "False" && c.Reason == v1alpha1.HostedClusterUnavailableReason
	}
}
