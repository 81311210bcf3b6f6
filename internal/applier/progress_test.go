package applier

import (
	"fmt"
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
		d := s.nextCheck("uid-a", "deploy", 2, now, interval)
		waits = append(waits, d)
		now = now.Add(d)
	}
	want := []time.Duration{}
	for range 10 {
		want = append(want, time.Second)
	}
	assert.Equal(t, append(want, interval, interval), waits)
	assert.Equal(t, time.Second, s.nextCheck("uid-a", "configure", 2, now, interval), "the next phase starts afresh")

	s.done("uid-a")
	assert.Equal(t, interval, s.nextCheck("uid-a", "deploy", 2, now, interval), "no memory, no quick checks")
	s.get("uid-a", "")
	assert.Equal(t, time.Second, s.nextCheck("uid-a", "deploy", 2, now, interval), "a new wait starts afresh")
	assert.Equal(t, 500*time.Millisecond, s.nextCheck("uid-b", "deploy", 2, now, 500*time.Millisecond), "an interval under a second is kept")
	var none progressByOwner
	assert.Equal(t, interval, none.nextCheck("uid-a", "deploy", 2, now, interval))
}

// TestNextCheckFlippingPhasesBounded: a resource whose wait goes back and forth between its
// phases (an object of the first that becomes unavailable again, read again after a failed pass
// or its maxAge: whoever runs the object decides when) gets quick checks for as many waits as
// it has phases until it converges, not for every change of phase: an hour of flips, or of a
// phase name new at every pass, costs at most ten quick checks a phase.
func TestNextCheckFlippingPhasesBounded(t *testing.T) {
	t.Parallel()
	const interval = 5 * time.Second
	for _, tc := range []struct {
		name  string
		phase func(pass int) string
	}{
		{"back and forth between two phases", func(pass int) string { return []string{"deploy", "configure"}[(pass/3)%2] }},
		{"a phase name new at every pass", func(pass int) string { return fmt.Sprintf("phase-%d", pass) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := clocktesting.NewFakeClock(time.Now())
			s := newProgressByOwner(clock)
			s.get("uid-a", "")
			start := clock.Now()
			var quick, passes int
			for now := start; now.Sub(start) < time.Hour; passes++ {
				d := s.nextCheck("uid-a", tc.phase(passes), 2, now, interval)
				if d < interval {
					quick++
				}
				now = now.Add(d)
			}
			assert.Positive(t, quick, "the first waits are checked quickly")
			assert.LessOrEqual(t, quick, 2*int(quickChecksFor/quickCheck), "quick checks in an hour: at most ten for each of the two phases")
			assert.Less(t, passes, 20+int(time.Hour/interval)+1, "passes in an hour")
		})
	}
}
