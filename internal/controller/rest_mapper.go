package controller

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewRESTMapper is the manager's RESTMapper (manager.Options.MapperProvider): controller-runtime's
// dynamic mapper, with its kind-to-resource answers kept for a while (memoMapper).
func NewRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return newMemoMapper(m, time.Now), nil
}

const (
	// memoTTL is how long a mapping is answered from memory before the delegate is asked
	// again: it bounds how much staler than the delegate the memory can be (a CRD deleted
	// and created again with another plural, the delegate reloaded since).
	memoTTL = time.Minute
	// maxMemoEntries bounds the memory: only kinds the servers serve are kept (misses are not),
	// so this is a bound on the number of kinds, far above what a cluster serves.
	maxMemoEntries = 4096
)

// memoMapper answers RESTMapping from memory. Every pass asks it for each of its objects at
// least twice (the object's scope, the client's resource path), and the delegate, a
// meta.PriorityRESTMapper over one mapper per API group, answers each question by asking every
// group and allocating a no-match error for each one that does not serve the kind: a fifth of
// all the controller's allocations at 1000 hosted clusters (docs/benchmarks.md). No library
// mapper keeps its answers (controller-runtime's keeps the discovery data, not the lookups), so
// this one does. Only successful answers for one version or none are kept, so a kind installed
// later is looked up as before; the rest of the interface is the delegate's.
type memoMapper struct {
	meta.RESTMapper
	now func() time.Time

	mu      sync.RWMutex
	entries map[memoKey]memoEntry
}

type memoKey struct{ group, kind, version string }

type memoEntry struct {
	mapping meta.RESTMapping
	at      time.Time
}

func newMemoMapper(delegate meta.RESTMapper, now func() time.Time) *memoMapper {
	return &memoMapper{RESTMapper: delegate, now: now, entries: map[memoKey]memoEntry{}}
}

// RESTMapping returns the delegate's mapping of gk, from memory when it answered the same
// question less than memoTTL ago. Each caller gets a copy of its own.
func (m *memoMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) > 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	k := memoKey{group: gk.Group, kind: gk.Kind}
	if len(versions) == 1 {
		k.version = versions[0]
	}
	now := m.now()
	m.mu.RLock()
	e, ok := m.entries[k]
	m.mu.RUnlock()
	if ok && now.Sub(e.at) < memoTTL {
		mapping := e.mapping
		return &mapping, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return mapping, err
	}
	m.mu.Lock()
	if _, kept := m.entries[k]; kept || len(m.entries) < maxMemoEntries {
		m.entries[k] = memoEntry{mapping: *mapping, at: now}
	}
	m.mu.Unlock()
	return mapping, nil
}

// Reset forgets what was kept, and resets the delegate if it can be.
func (m *memoMapper) Reset() {
	m.mu.Lock()
	clear(m.entries)
	m.mu.Unlock()
	meta.MaybeResetRESTMapper(m.RESTMapper)
}
