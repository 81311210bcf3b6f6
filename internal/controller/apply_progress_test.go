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
