package fleet

import "sync"

// pendingWrites remembers what the fleet reconciler wrote until the manager's cache shows it.
// The cache is behind the API server for a moment after every write, and a reconcile that ran
// on it would decide from the object as it was before: count a member it just moved as still
// Ready on its old revision, and move more members than maxUnavailable allows (memberWrites),
// or take a Secret copy it just wrote for a stale one and write it again (fleetSecrets). Keys
// name the fleet that wrote (fleetKey), so that what a deleted fleet wrote goes with it. The
// zero value is ready to use; reconciles of several fleets may use one at the same time.
type pendingWrites[K fleetKey, W any] struct {
	mu      sync.Mutex
	written map[K]W
}

// fleetKey is a key of pendingWrites: what was written, and by which fleet (by name).
type fleetKey interface {
	comparable
	fleetName() string
}

// record remembers w as what was last written under key.
func (p *pendingWrites[K, W]) record(key K, w W) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.written == nil {
		p.written = map[K]W{}
	}
	p.written[key] = w
}

// pending returns what was last written under key while the cache does not show it yet, as
// caughtUp (given that write) says. A write the cache shows is forgotten, in the same critical
// section as the check, so that a write recorded meanwhile is not forgotten with it; caughtUp
// runs under the lock and must not call back.
func (p *pendingWrites[K, W]) pending(key K, caughtUp func(W) bool) (W, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.written[key]
	if ok && caughtUp(w) {
		delete(p.written, key)
		ok = false
	}
	if !ok {
		var none W
		return none, false
	}
	return w, true
}

// drop forgets what was written under key, when the object written is deleted.
func (p *pendingWrites[K, W]) drop(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.written, key)
}

// forget drops what a fleet wrote, when the fleet is gone.
func (p *pendingWrites[K, W]) forget(fleet string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.written {
		if k.fleetName() == fleet {
			delete(p.written, k)
		}
	}
}
