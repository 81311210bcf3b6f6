package reconciler

import "sync"

// Written remembers what a reconciler wrote until the manager's cache shows it. The cache is
// behind the API server for a moment after every write, and a reconcile that ran on it would
// decide from the object as it was before: a Lifecycle would report from the status before its
// last write, a fleet would count a member it just moved as still on its old revision and move
// more than maxUnavailable allows, or take a Secret copy it just wrote for a stale one and
// write it again. The zero value is ready to use; reconciles may use one at the same time.
type Written[K comparable, W any] struct {
	mu      sync.Mutex
	written map[K]W
}

// Remember keeps w as what was last written under key.
func (p *Written[K, W]) Remember(key K, w W) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.written == nil {
		p.written = map[K]W{}
	}
	p.written[key] = w
}

// Pending returns what was last written under key while the cache does not show it yet, as
// caughtUp (given that write) says. A write the cache shows is forgotten, in the same critical
// section as the check, so that a write recorded meanwhile is not forgotten with it; caughtUp
// runs under the lock and must not call back.
func (p *Written[K, W]) Pending(key K, caughtUp func(W) bool) (W, bool) {
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

// Drop forgets what was written under key: the object is gone, or what the API server holds
// after a failed write is not known.
func (p *Written[K, W]) Drop(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.written, key)
}

// DropWhere forgets what was written under every key match selects: everything one fleet
// wrote, when the fleet is gone.
func (p *Written[K, W]) DropWhere(match func(K) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.written {
		if match(k) {
			delete(p.written, k)
		}
	}
}

// Len is how many writes are remembered.
func (p *Written[K, W]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.written)
}
