package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestProgressByOwner: a resource's passes share one memory while it stays on the same
// HostedCluster and keeps making passes; another HostedCluster, done (converged or deleted),
// or progressTTL without a pass start afresh.
func TestProgressByOwner(t *testing.T) {
	t.Parallel()
	clock := clocktesting.NewFakeClock(time.Now())
	s := newProgressByOwner(clock)

	first := s.get("uid-a", "clusters/a")
	assert.Same(t, first, s.get("uid-a", "clusters/a"), "the same resource on the same HostedCluster")
	assert.NotSame(t, first, s.get("uid-b", "clusters/a"), "another resource")

	clock.Step(progressTTL - time.Minute)
	assert.Same(t, first, s.get("uid-a", "clusters/a"), "a pass renews the memory")
	clock.Step(progressTTL - time.Minute)
	assert.Same(t, first, s.get("uid-a", "clusters/a"), "within progressTTL of the last pass")

	moved := s.get("uid-a", "clusters/b")
	assert.NotSame(t, first, moved, "another HostedCluster behind the namespace")

	s.done("uid-a")
	assert.NotSame(t, moved, s.get("uid-a", "clusters/b"), "done forgets")

	kept := s.get("uid-a", "clusters/b")
	clock.Step(progressTTL + time.Second)
	assert.NotSame(t, kept, s.get("uid-a", "clusters/b"), "progressTTL without a pass forgets")

	var zero progressByOwner
	assert.NotSame(t, zero.get("uid-a", ""), zero.get("uid-a", ""), "the zero value remembers nothing")
	zero.done("uid-a")
}

// TestNextCheck: a phase that starts waiting is looked at every second for ten seconds, then
// every progress interval; another phase, or a resource that converged and waits again, starts
// with quick checks once more.
func TestNextCheck(t *testing.T) {
	t.Parallel()
	clock := clocktesting.NewFakeClock(time.Now())
	s := newProgressByOwner(clock)
	const interval = 5 * time.Second
	s.get("uid-a", "")
	now := clock.Now()
	var waits []time.Duration
	for range 12 {
		d := s.nextCheck("uid-a", "deploy", now, interval)
		waits = append(waits, d)
		now = now.Add(d)
	}
	want := []time.Duration{}
	for range 10 {
		want = append(want, time.Second)
	}
	assert.Equal(t, append(want, interval, interval), waits)
	assert.Equal(t, time.Second, s.nextCheck("uid-a", "configure", now, interval), "the next phase starts afresh")

	s.done("uid-a")
	assert.Equal(t, interval, s.nextCheck("uid-a", "deploy", now, interval), "no memory, no quick checks")
	s.get("uid-a", "")
	assert.Equal(t, time.Second, s.nextCheck("uid-a", "deploy", now, interval), "a new wait starts afresh")
	assert.Equal(t, 500*time.Millisecond, s.nextCheck("uid-b", "deploy", now, 500*time.Millisecond), "an interval under a second is kept")
	var none progressByOwner
	assert.Equal(t, interval, none.nextCheck("uid-a", "deploy", now, interval))
}
