package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func TestPlanApproval(t *testing.T) {
	t.Parallel()
	now := time.Now()
	order := []string{"canary", "prod"}
	// canary done on the target, prod on the stable revision (or partly on the target).
	fleet := func(prodOnTarget int) []*Member {
		var ms []*Member
		for i := range 2 {
			ms = append(ms, planMember(fmt.Sprintf("c%d", i), "canary", "new", true, now))
		}
		for i := range 3 {
			rev := "old"
			if i < prodOnTarget {
				rev = "new"
			}
			ms = append(ms, planMember(fmt.Sprintf("p%d", i), "prod", rev, true, now))
		}
		return ms
	}
	gated := v1alpha1.FleetRolloutStrategy{ApprovalRequired: []string{"prod"}}
	prod := func(plan Plan) v1alpha1.PartitionStatus { return plan.Partitions[1] }

	t.Run("a partition needing approval waits after the previous one completes", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(0), order, "new", "old", gated, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionComplete, plan.Partitions[0].State)
		assert.Equal(t, v1alpha1.PartitionAwaitingApproval, prod(plan).State)
		assert.Equal(t, "prod", plan.Current)
		assert.Equal(t, "prod", plan.AwaitingApproval)
		assert.False(t, plan.Complete)
		for i := range 3 {
			assert.Equal(t, ToStable, plan.Assign[fmt.Sprintf("p%d", i)], "no member moves before the approval")
		}
		assert.Nil(t, prod(plan).StartedAt, "the rollout has not started the partition")
	})
	t.Run("an approval of the target lets it start", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(0), order, "new", "old", gated, nil, now, Gates{Approved: map[string]bool{"prod": true}})
		assert.Equal(t, v1alpha1.PartitionProgressing, prod(plan).State)
		assert.Empty(t, plan.AwaitingApproval)
		assert.Equal(t, 1, countAssigned(plan, ToTarget)-2, "one prod member moves (maxUnavailable 1)")
	})
	t.Run("an approval of another partition does nothing", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(0), order, "new", "old", gated, nil, now, Gates{Approved: map[string]bool{"canary": true}})
		assert.Equal(t, v1alpha1.PartitionAwaitingApproval, prod(plan).State)
	})
	t.Run("a partition not listed needs none", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(0), order, "new", "old", v1alpha1.FleetRolloutStrategy{ApprovalRequired: []string{"other"}}, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionProgressing, prod(plan).State)
	})
	t.Run("a partition that started goes on when the approval is withdrawn", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(1), order, "new", "old", gated, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionProgressing, prod(plan).State)
	})
	t.Run("the first partition may need approval too", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		for _, m := range ms[:2] {
			onRevision(m, "old")
		}
		plan := Decide(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{ApprovalRequired: []string{"canary"}}, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionAwaitingApproval, plan.Partitions[0].State)
		assert.Equal(t, v1alpha1.PartitionPending, prod(plan).State)
		assert.Equal(t, 0, countAssigned(plan, ToTarget))
	})
	t.Run("nothing to roll out, nothing to approve", func(t *testing.T) {
		t.Parallel()
		ms := fleet(3)
		plan := Decide(ms, order, "new", "new", gated, nil, now, Gates{})
		assert.True(t, plan.Complete)
		assert.Empty(t, plan.AwaitingApproval)
	})
	t.Run("a rollback does not wait for approval", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(1), order, "new", "old", gated, nil, now, Gates{Rejected: "new"})
		assert.True(t, plan.RollingBack)
		assert.Equal(t, ToStable, plan.Assign["p0"])
	})
}
