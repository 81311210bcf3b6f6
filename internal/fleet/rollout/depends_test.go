package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestPlanWaitingMembersStandAside: members that wait for the fleets spec.dependsOn names
// (Gates.Waiting) stand aside as blocked ones do: none is created or moved, they use no
// budget, count no failure and hold no partition back, and are listed with reason
// DependencyNotReady; a held member stays held.
func TestPlanWaitingMembersStandAside(t *testing.T) {
	t.Parallel()
	now := time.Now()
	why := "waiting for the fleets spec.dependsOn names: fleet network has no member here yet"
	t.Run("first rollout: the others are created and complete it", func(t *testing.T) {
		t.Parallel()
		ms := []*Member{{Namespace: "a"}, {Namespace: "b"}, planMember("c", "", "new", true, now)}
		plan := Decide(ms, []string{""}, "new", "", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{Waiting: map[string]string{"b": why}})
		assert.Equal(t, ToTarget, plan.Assign["a"])
		assert.Equal(t, noMember, plan.Assign["b"], "not created while it waits")
		assert.Equal(t, int32(1), plan.Counts.Blocked)
		assert.Equal(t, []v1alpha1.MemberStatus{{Namespace: "b", Reason: v1alpha1.DependencyNotReadyReason, Message: why}}, plan.Blocked)
	})
	t.Run("a rollout: the waiting member is not moved, uses no budget, fails nothing", func(t *testing.T) {
		t.Parallel()
		one := intstr.FromInt32(1)
		late := planMember("a", "", "old", false, now.Add(-time.Hour)) // not Ready, past any deadline
		ms := []*Member{late, planMember("b", "", "old", true, now), planMember("c", "", "new", true, now)}
		plan := Decide(ms, []string{""}, "new", "old", v1alpha1.FleetRolloutStrategy{MaxUnavailable: &one}, nil, now,
			Gates{Waiting: map[string]string{"a": why}})
		assert.Equal(t, ToStable, plan.Assign["a"], "kept where it is")
		assert.Equal(t, ToTarget, plan.Assign["b"], "the budget is the others'")
		assert.False(t, plan.Halted)
		assert.Zero(t, plan.Counts.Failed)
	})
	t.Run("held wins", func(t *testing.T) {
		t.Parallel()
		held := planMember("a", "", "old", true, now)
		held.Pkg.Annotations[v1alpha1.HoldAnnotation] = "freeze"
		plan := Decide([]*Member{held}, []string{""}, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{Waiting: map[string]string{"a": why}})
		assert.Equal(t, int32(1), plan.Counts.Held)
		assert.Zero(t, plan.Counts.Blocked)
		assert.Empty(t, plan.Waited)
	})
	t.Run("a partition the rollout has not reached: its members are kept, not blocked; a new cluster waits", func(t *testing.T) {
		t.Parallel()
		ms := []*Member{planMember("c0", "canary", "old", true, now), planMember("p0", "prod", "old", true, now), {Namespace: "p1", Partition: "prod"}}
		plan := Decide(ms, []string{"canary", "prod"}, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now,
			Gates{Waiting: map[string]string{"c0": why, "p0": why, "p1": why}})
		assert.Equal(t, map[string]bool{"c0": true, "p1": true}, plan.Waited)
		assert.Equal(t, int32(2), plan.Counts.Blocked)
		assert.Equal(t, ToStable, plan.Assign["p0"], "kept on the stable revision, as any member of a partition not reached")
		assert.Equal(t, noMember, plan.Assign["p1"], "not created while it waits")
	})
}
