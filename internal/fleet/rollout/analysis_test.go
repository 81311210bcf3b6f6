package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// The planner's side of spec.rollout.analysis: a soak ends only when the checks passed after
// it began, a member a check failed counts as failed (and enough of them halt), a partition
// soaks at least one interval with an analysis.
func TestPlanAnalysis(t *testing.T) {
	t.Parallel()
	now := time.Now()
	order := []string{"canary", "prod"}
	members := func() []*Member {
		var ms []*Member
		for i := range 2 {
			ms = append(ms, planMember(fmt.Sprintf("c%d", i), "canary", "new", true, now))
		}
		for i := range 3 {
			ms = append(ms, planMember(fmt.Sprintf("p%d", i), "prod", "old", true, now))
		}
		return ms
	}
	strategy := v1alpha1.FleetRolloutStrategy{Soak: &metav1.Duration{Duration: time.Minute},
		Analysis: &v1alpha1.FleetAnalysis{Checks: []v1alpha1.FleetCheck{{Name: "errors", CEL: "true"}}}}
	soakedSince := metav1.NewTime(now.Add(-2 * time.Minute))
	soaking := []v1alpha1.PartitionStatus{{Name: "canary", State: v1alpha1.PartitionSoaking, LastTransitionTime: soakedSince}}

	t.Run("a soak without a passing evaluation does not end", func(t *testing.T) {
		t.Parallel()
		plan := Decide(members(), order, "new", "old", strategy, soaking, now, Gates{Analysis: &AnalysisGate{Interval: 30 * time.Second}})
		assert.Equal(t, v1alpha1.PartitionSoaking, plan.Partitions[0].State)
		assert.Equal(t, v1alpha1.PartitionPending, plan.Partitions[1].State)
		assert.InDelta(t, 30*time.Second, plan.WakeAfter, float64(time.Second), "looked at again at the interval")

		plan = Decide(members(), order, "new", "old", strategy, soaking, now, Gates{Analysis: &AnalysisGate{Partition: "canary", Interval: 30 * time.Second, Passed: true}})
		assert.Equal(t, v1alpha1.PartitionComplete, plan.Partitions[0].State, "passed after the soak began")
		assert.Equal(t, "prod", plan.Current)
	})
	t.Run("a member a check failed counts as failed", func(t *testing.T) {
		t.Parallel()
		gate := &AnalysisGate{Partition: "canary", Interval: 30 * time.Second, Failed: map[string]string{"c0": "analysis check errors: false"}}
		plan := Decide(members(), order, "new", "old", strategy, soaking, now, Gates{Analysis: gate})
		assert.True(t, plan.Halted, "one failure reaches the default threshold of 1")
		assert.Equal(t, v1alpha1.PartitionHalted, plan.Partitions[0].State)
		if assert.Len(t, plan.Failed, 1) {
			assert.Equal(t, v1alpha1.AnalysisFailedReason, plan.Failed[0].Reason)
			assert.Equal(t, "analysis check errors: false", plan.Failed[0].Message)
		}
		two := intstr.FromInt32(2)
		under := strategy
		under.FailureThreshold = &two
		plan = Decide(members(), order, "new", "old", under, soaking, now, Gates{Analysis: gate})
		assert.False(t, plan.Halted)
		assert.Equal(t, v1alpha1.PartitionProgressing, plan.Partitions[0].State, "under the threshold the partition is not done")
		assert.Equal(t, v1alpha1.PartitionPending, plan.Partitions[1].State)
	})
	t.Run("a verdict of another partition fails nobody here", func(t *testing.T) {
		t.Parallel()
		gate := &AnalysisGate{Partition: "prod", Interval: 30 * time.Second, Failed: map[string]string{"c0": "x"}}
		plan := Decide(members(), order, "new", "old", strategy, soaking, now, Gates{Analysis: gate})
		assert.False(t, plan.Halted)
		assert.Equal(t, v1alpha1.PartitionSoaking, plan.Partitions[0].State)
	})
	t.Run("with an analysis a partition soaks at least one interval", func(t *testing.T) {
		t.Parallel()
		noSoak := v1alpha1.FleetRolloutStrategy{Analysis: strategy.Analysis}
		plan := Decide(members(), order, "new", "old", noSoak, nil, now, Gates{Analysis: &AnalysisGate{Interval: 30 * time.Second}})
		assert.Equal(t, v1alpha1.PartitionSoaking, plan.Partitions[0].State)
		plan = Decide(members(), order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionComplete, plan.Partitions[0].State, "without one it does not soak")
	})
}
