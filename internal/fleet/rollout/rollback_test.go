package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// TestPlanRollback covers spec.rollout.onFailure: each case names the rule it checks.
func TestPlanRollback(t *testing.T) {
	t.Parallel()
	now := time.Now()
	order := []string{"canary", "prod"}
	rollback := func(maxUnavailable int32) v1alpha1.FleetRolloutStrategy {
		mu := intstr.FromInt32(maxUnavailable)
		return v1alpha1.FleetRolloutStrategy{MaxUnavailable: &mu, OnFailure: v1alpha1.FleetFailureRollback,
			ProgressDeadline: &metav1.Duration{Duration: 30 * time.Second}}
	}
	// fleet: canaries c0..c3 (c0 failed on "new", c1 Ready on "new", c2 c3 Ready on "old"),
	// prod p0..p3 Ready on "old".
	fleet := func() []*Member {
		ms := []*Member{
			onCluster(stalled(planMember("c0", "canary", "new", false, now)), nil),
			onCluster(planMember("c1", "canary", "new", true, now), nil),
		}
		for i := 2; i < 4; i++ {
			ms = append(ms, onCluster(planMember(fmt.Sprintf("c%d", i), "canary", "old", true, now), nil))
		}
		for i := range 4 {
			ms = append(ms, onCluster(planMember(fmt.Sprintf("p%d", i), "prod", "old", true, now), nil))
		}
		return ms
	}
	tests := []struct {
		name     string
		members  func() []*Member
		strategy v1alpha1.FleetRolloutStrategy
		stable   string
		gates    Gates
		check    func(t *testing.T, plan Plan)
	}{{
		name: "Halt (the default) leaves the failed target where it is", members: fleet, stable: "old",
		strategy: v1alpha1.FleetRolloutStrategy{ProgressDeadline: &metav1.Duration{Duration: 30 * time.Second}},
		check: func(t *testing.T, plan Plan) {
			assert.True(t, plan.Halted)
			assert.False(t, plan.Rejects)
			assert.Equal(t, ToTarget, plan.Assign["c0"])
			assert.Equal(t, ToTarget, plan.Assign["c1"])
		},
	}, {
		name:    "Rollback rejects the target on a halt and moves its members back, the failed one at once, Ready ones within maxUnavailable",
		members: fleet, stable: "old", strategy: rollback(1),
		check: func(t *testing.T, plan Plan) {
			assert.True(t, plan.Rejects)
			assert.True(t, plan.RollingBack)
			assert.False(t, plan.Complete, "a rollback never promotes the stable revision")
			assert.Equal(t, ToStable, plan.Assign["c0"], "failed: not Ready, costs no availability")
			assert.Equal(t, keepAsIs, plan.Assign["c1"], "Ready: waits for budget (c0 uses the 1 allowed)")
			assert.Equal(t, ToStable, plan.Assign["c2"])
			assert.Equal(t, ToStable, plan.Assign["p0"])
			assert.Equal(t, v1alpha1.PartitionRollingBack, plan.Partitions[0].State)
			assert.Equal(t, v1alpha1.PartitionRolledBack, plan.Partitions[1].State)
			assert.Equal(t, "canary", plan.Current)
			require.Len(t, plan.Failed, 1)
			assert.Equal(t, "c0", plan.Failed[0].Namespace)
		},
	}, {
		name:    "a Ready member on the target moves back as the budget allows",
		members: fleet, stable: "old", strategy: rollback(2),
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToStable, plan.Assign["c0"])
			assert.Equal(t, ToStable, plan.Assign["c1"])
		},
	}, {
		name:    "without a stable revision Rollback halts as Halt does",
		members: fleet, stable: "", strategy: rollback(1),
		check: func(t *testing.T, plan Plan) {
			assert.True(t, plan.Halted)
			assert.False(t, plan.Rejects)
			assert.False(t, plan.RollingBack)
		},
	}, {
		name: "a rejected target is not rolled out again: members on it go back, none moves to it, the rollback is done when it is off every member",
		members: func() []*Member {
			ms := fleet()
			ms[0] = onCluster(planMember("c0", "canary", "old", true, now), nil)
			ms[1] = onCluster(planMember("c1", "canary", "old", true, now), nil)
			return ms
		},
		stable: "old", strategy: rollback(1), gates: Gates{Rejected: "new"},
		check: func(t *testing.T, plan Plan) {
			assert.Zero(t, countAssigned(plan, ToTarget))
			assert.Equal(t, 8, countAssigned(plan, ToStable))
			assert.False(t, plan.Halted)
			assert.False(t, plan.Rejects, "rejected already")
			assert.Empty(t, plan.Current, "nothing left to move back")
			for _, ps := range plan.Partitions {
				assert.Equal(t, v1alpha1.PartitionRolledBack, ps.State)
			}
		},
	}, {
		name: "a held member on the rejected target stays (a hold wins)",
		members: func() []*Member {
			ms := fleet()
			ms[1].Pkg.Annotations[v1alpha1.HoldAnnotation] = "freeze"
			return ms
		},
		stable: "old", strategy: rollback(3),
		check: func(t *testing.T, plan Plan) {
			assert.True(t, plan.Rejects)
			assert.Equal(t, keepAsIs, plan.Assign["c1"])
			assert.Len(t, plan.Held, 1)
		},
	}, {
		name: "a blocked member on the rejected target stays until unblocked",
		members: func() []*Member {
			ms := fleet()
			ms[0] = onCluster(planMember("c0", "canary", "old", true, now), nil)
			onCluster(ms[1], func(hc *hosted.HostedCluster) { hc.Available = false })
			return ms
		},
		stable: "old", strategy: rollback(3), gates: Gates{Rejected: "new"},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, keepAsIs, plan.Assign["c1"])
			assert.Len(t, plan.Blocked, 1)
			assert.Equal(t, v1alpha1.PartitionRolledBack, plan.Partitions[0].State, "a blocked member holds no rollback back")
		},
	}, {
		name:    "once unblocked, a member on the rejected target moves back",
		members: fleet, stable: "old", strategy: rollback(3), gates: Gates{Rejected: "new"},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToStable, plan.Assign["c1"])
		},
	}, {
		name: "a new cluster gets the stable revision; a member on an earlier target stays",
		members: func() []*Member {
			ms := fleet()
			ms[2] = onRevision(ms[2], "older")
			return append(ms, &Member{Namespace: "p9", Partition: "prod"})
		},
		stable: "old", strategy: rollback(1), gates: Gates{Rejected: "new"},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToStable, plan.Assign["p9"])
			assert.Equal(t, keepAsIs, plan.Assign["c2"])
		},
	}, {
		name:    "a closed maintenance window does not hold a rollback",
		members: fleet, stable: "old", strategy: rollback(1),
		gates: Gates{Rejected: "new", Windows: []Window{closedWindow(t, now)}},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToStable, plan.Assign["c0"])
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, Decide(tt.members(), order, "new", tt.stable, tt.strategy, nil, now, tt.gates))
		})
	}
}

// closedWindow is a window of one minute that opens at the next full hour after now (or the one
// after, when now is within a minute of it): closed now.
func closedWindow(t *testing.T, now time.Time) Window {
	t.Helper()
	next := now.UTC().Add(2 * time.Minute).Truncate(time.Hour).Add(time.Hour)
	ws, err := ParseWindows([]v1alpha1.FleetWindow{{Schedule: fmt.Sprintf("%d %d * * *", next.Minute(), next.Hour()), Duration: metav1.Duration{Duration: time.Minute}}})
	require.NoError(t, err)
	return ws[0]
}
