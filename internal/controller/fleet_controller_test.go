package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestFleetOutcome: what a fleet's plan and the members it could not keep make of its Ready.
func TestFleetOutcome(t *testing.T) {
	t.Parallel()
	failed := []v1alpha1.MemberStatus{{Namespace: "clusters-a", Reason: v1alpha1.CollisionReason, Message: "taken"}}
	cases := []struct {
		name     string
		plan     rolloutPlan
		problems []v1alpha1.MemberStatus
		paused   bool
		state    outcomeState
		reason   string
	}{
		{"halted wins over problems", rolloutPlan{halted: true, current: "canary", failed: failed, counts: v1alpha1.MemberCounts{Total: 2}}, failed, false, outcomeStalled, v1alpha1.RolloutHaltedReason},
		{"no member selected", rolloutPlan{complete: true}, nil, false, outcomeSucceeded, v1alpha1.ReconciliationSucceededReason},
		{"no member but a collision", rolloutPlan{complete: true}, failed, false, outcomeProgressing, v1alpha1.MembersFailedReason},
		{"members not kept", rolloutPlan{counts: v1alpha1.MemberCounts{Total: 2}}, failed, false, outcomeProgressing, v1alpha1.MembersFailedReason},
		{"complete", rolloutPlan{complete: true, counts: v1alpha1.MemberCounts{Total: 2, Ready: 2, Updated: 2}}, nil, true, outcomeSucceeded, v1alpha1.ReconciliationSucceededReason},
		{"paused", rolloutPlan{current: "late", counts: v1alpha1.MemberCounts{Total: 2}}, nil, true, outcomeWaiting, v1alpha1.RolloutPausedReason},
		{"rolling out", rolloutPlan{current: "late", counts: v1alpha1.MemberCounts{Total: 2}}, nil, false, outcomeProgressing, v1alpha1.RolloutProgressingReason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &v1alpha1.HostedClusterPackage{}
			f.Spec.Rollout.Paused = c.paused
			f.Status.Target = &v1alpha1.FleetRevision{Name: "abc-def"}
			o := fleetOutcome(f, c.plan, c.problems)
			assert.Equal(t, c.state, o.state)
			if c.state != outcomeSucceeded {
				assert.Equal(t, c.reason, o.reason)
			}
			assert.NotEmpty(t, o.message)
		})
	}
}

// TestFleetRequeue: the interval, brought forward by the plan's wake-up and by a failure.
func TestFleetRequeue(t *testing.T) {
	t.Parallel()
	const interval, retry = time.Hour, 10 * time.Second
	assert.GreaterOrEqual(t, fleetRequeue(interval, 0, false, retry), interval)
	assert.Equal(t, time.Minute, fleetRequeue(interval, time.Minute, false, retry))
	assert.Equal(t, retry, fleetRequeue(interval, time.Minute, true, retry))
	assert.Equal(t, time.Second, fleetRequeue(interval, time.Second, true, retry))
}
