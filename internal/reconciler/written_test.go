package reconciler

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

type writeKey struct{ fleet, name string }

// ofFleet selects the keys of what fleet wrote.
func ofFleet(fleet string) func(writeKey) bool {
	return func(k writeKey) bool { return k.fleet == fleet }
}

// TestWritten: a write is pending until the cache shows it, then forgotten; a later write
// replaces an earlier one; deleting the object or the fleet forgets it.
func TestWritten(t *testing.T) {
	t.Parallel()
	shows := func(rv string) func(string) bool { return func(w string) bool { return w == rv } }
	var p Written[writeKey, string]
	a, b, other := writeKey{"f", "a"}, writeKey{"f", "b"}, writeKey{"g", "a"}

	_, pending := p.Pending(a, shows(""))
	assert.False(t, pending, "nothing written")

	p.Remember(a, "2")
	w, pending := p.Pending(a, shows("1"))
	assert.True(t, pending, "the cache shows an older version")
	assert.Equal(t, "2", w)
	p.Remember(a, "3")
	w, pending = p.Pending(a, shows("2"))
	assert.True(t, pending, "the last write counts")
	assert.Equal(t, "3", w)
	_, pending = p.Pending(a, shows("3"))
	assert.False(t, pending, "the cache shows it")
	_, pending = p.Pending(a, shows("1"))
	assert.False(t, pending, "forgotten once shown, whatever the cache shows next")

	p.Remember(a, "4")
	p.Drop(a)
	_, pending = p.Pending(a, shows(""))
	assert.False(t, pending, "dropped")

	p.Remember(a, "5")
	p.Remember(b, "5")
	p.Remember(other, "5")
	p.DropWhere(ofFleet("f"))
	_, pendingA := p.Pending(a, shows(""))
	_, pendingB := p.Pending(b, shows(""))
	_, pendingOther := p.Pending(other, shows(""))
	assert.False(t, pendingA, "the fleet's writes go with it")
	assert.False(t, pendingB, "the fleet's writes go with it")
	assert.True(t, pendingOther, "another fleet's stay")
}

// TestWrittenConcurrent: the reconciles of several fleets use one memory at a time (the
// race detector watches).
func TestWrittenConcurrent(t *testing.T) {
	t.Parallel()
	var p Written[writeKey, int]
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			key := writeKey{fmt.Sprint("fleet-", i), "a"}
			for n := range 100 {
				p.Remember(key, n)
				w, pending := p.Pending(key, func(int) bool { return false })
				assert.True(t, pending)
				assert.Equal(t, n, w, "no other fleet's write")
			}
			p.DropWhere(ofFleet(key.fleet))
		})
	}
	wg.Wait()
	assert.Zero(t, p.Len())
}
