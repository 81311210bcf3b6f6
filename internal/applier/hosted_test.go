package applier

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// TestPausedUntilWakesWhenItEnds: a hosted phase held by spec.pausedUntil is tried again when
// the pause ends, not a whole retry interval later; one held by "true" or by the condition
// alone waits for a change (which the HostedCluster watch reports) or the retry interval.
func TestPausedUntilWakesWhenItEnds(t *testing.T) {
	t.Parallel()
	// pausedUntil is set relative to the subtest's own clock: a parallel subtest may wait for a
	// slot long after its parent started, and the requeue is computed against the real clock.
	const future = "in 20s"
	for _, tt := range []struct {
		name     string
		hc       hosted.HostedCluster
		maxRetry time.Duration
	}{
		{"a time to come", hosted.HostedCluster{Available: true, PausedUntil: future}, 22 * time.Second},
		{"true", hosted.HostedCluster{Available: true, PausedUntil: "true"}, time.Minute},
		{"the condition", hosted.HostedCluster{Available: true, Paused: true}, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			if tt.hc.PausedUntil == future {
				tt.hc.PausedUntil = now.Add(20 * time.Second).UTC().Format(time.RFC3339)
			}
			err := gateOnHostedCluster(&tt.hc, "clusters-guest", now)
			require.Error(t, err)
			pkg := &v1alpha1.Package{}
			res := Conclude(t.Context(), pkg, nil, err, reconciler.Intervals{Interval: time.Hour, Retry: time.Minute, Progress: time.Second}, "")
			assert.Equal(t, v1alpha1.HostedClusterUnavailableReason, conditions.GetReason(pkg, meta.ReadyCondition))
			assert.Contains(t, conditions.GetMessage(pkg, meta.ReadyCondition), "paused")
			assert.Positive(t, res.RequeueAfter)
			assert.LessOrEqual(t, res.RequeueAfter, tt.maxRetry)
			if tt.maxRetry < time.Minute {
				return
			}
			assert.Equal(t, time.Minute, res.RequeueAfter, "the retry interval")
		})
	}
}
