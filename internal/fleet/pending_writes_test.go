package fleet

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

type writeKey struct{ fleet, name string }

func (k writeKey) fleetName() string { return k.fleet }

// TestPendingWrites: a write is pending until the cache shows it, then forgotten; a later write
// replaces an earlier one; deleting the object or the fleet forgets it.
func TestPendingWrites(t *testing.T) {
	t.Parallel()
	shows := func(rv string) func(string) bool { return func(w string) bool { return w == rv } }
	var p pendingWrites[writeKey, string]
	a, b, other := writeKey{"f", "a"}, writeKey{"f", "b"}, writeKey{"g", "a"}

	_, pending := p.pending(a, shows(""))
	assert.False(t, pending, "nothing written")

	p.record(a, "2")
	w, pending := p.pending(a, shows("1"))
	assert.True(t, pending, "the cache shows an older version")
	assert.Equal(t, "2", w)
	p.record(a, "3")
	w, pending = p.pending(a, shows("2"))
	assert.True(t, pending, "the last write counts")
	assert.Equal(t, "3", w)
	_, pending = p.pending(a, shows("3"))
	assert.False(t, pending, "the cache shows it")
	_, pending = p.pending(a, shows("1"))
	assert.False(t, pending, "forgotten once shown, whatever the cache shows next")

	p.record(a, "4")
	p.drop(a)
	_, pending = p.pending(a, shows(""))
	assert.False(t, pending, "dropped")

	p.record(a, "5")
	p.record(b, "5")
	p.record(other, "5")
	p.forget("f")
	_, pendingA := p.pending(a, shows(""))
	_, pendingB := p.pending(b, shows(""))
	_, pendingOther := p.pending(other, shows(""))
	assert.False(t, pendingA, "the fleet's writes go with it")
	assert.False(t, pendingB, "the fleet's writes go with it")
	assert.True(t, pendingOther, "another fleet's stay")
}

// TestPendingWritesConcurrent: the reconciles of several fleets use one memory at a time (the
// race detector watches).
func TestPendingWritesConcurrent(t *testing.T) {
	t.Parallel()
	var p pendingWrites[writeKey, int]
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			key := writeKey{fmt.Sprint("fleet-", i), "a"}
			for n := range 100 {
				p.record(key, n)
				w, pending := p.pending(key, func(int) bool { return false })
				assert.True(t, pending)
				assert.Equal(t, n, w, "no other fleet's write")
			}
			p.forget(key.fleet)
		})
	}
	wg.Wait()
	assert.Empty(t, p.written)
}
