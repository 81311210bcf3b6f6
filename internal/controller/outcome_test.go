package controller

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestMarkOutcome: each outcome sets Ready, and Reconciling or Stalled, the one way every kind
// reports it, whatever the conditions were before.
func TestMarkOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		o                          outcome
		ready                      metav1.ConditionStatus
		readyReason                string
		reconcilingReason, stalled string // "" for absent
	}{
		{outcome{state: outcomeSucceeded, message: "done"}, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "", ""},
		{outcome{state: outcomeStalled, reason: v1alpha1.RolloutHaltedReason, message: "halted"}, metav1.ConditionFalse, v1alpha1.RolloutHaltedReason, "", v1alpha1.RolloutHaltedReason},
		{outcome{state: outcomeRetrying, reason: v1alpha1.PullFailedReason, message: "down"}, metav1.ConditionFalse, v1alpha1.PullFailedReason, v1alpha1.ProgressingWithRetryReason, ""},
		{outcome{state: outcomeProgressing, reason: v1alpha1.RolloutProgressingReason, message: "1/2/3"}, metav1.ConditionFalse, v1alpha1.RolloutProgressingReason, v1alpha1.RolloutProgressingReason, ""},
		{outcome{state: outcomeWaiting, reason: v1alpha1.RolloutPausedReason, message: "paused"}, metav1.ConditionFalse, v1alpha1.RolloutPausedReason, "", ""},
	}
	for _, c := range cases {
		for _, before := range []func(*v1alpha1.HostedClusterPackage){
			func(*v1alpha1.HostedClusterPackage) {},
			func(f *v1alpha1.HostedClusterPackage) {
				conditions.MarkStalled(f, "Old", "old")
				conditions.MarkReconciling(f, "Old", "old")
			},
		} {
			f := &v1alpha1.HostedClusterPackage{}
			before(f)
			markOutcome(f, c.o)
			ready := conditions.Get(f, meta.ReadyCondition)
			if assert.NotNil(t, ready) {
				assert.Equal(t, c.ready, ready.Status, c.readyReason)
				assert.Equal(t, c.readyReason, ready.Reason)
				assert.Equal(t, c.o.message, ready.Message)
			}
			assert.Equal(t, c.reconcilingReason != "", conditions.Has(f, meta.ReconcilingCondition), c.readyReason)
			assert.Equal(t, c.reconcilingReason, conditions.GetReason(f, meta.ReconcilingCondition), c.readyReason)
			assert.Equal(t, c.stalled != "", conditions.Has(f, meta.StalledCondition), c.readyReason)
			assert.Equal(t, c.stalled, conditions.GetReason(f, meta.StalledCondition), c.readyReason)
		}
	}
}

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

// TestRequestAge: a pending reconcile request takes a resolution made after it; one handled
// before, or none, leaves the kind's own rule.
func TestRequestAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	token := now.Add(-3 * time.Second).Format(time.RFC3339Nano)
	obj := func(token string) *v1alpha1.HostedClusterPackage {
		f := &v1alpha1.HostedClusterPackage{}
		if token != "" {
			f.Annotations = map[string]string{meta.ReconcileRequestAnnotation: token}
		}
		return f
	}
	cases := []struct {
		name        string
		token, last string
		age         time.Duration
		pending     bool
	}{
		{"no request", "", "", 0, false},
		{"handled before", token, token, 0, false},
		{"pending", token, "earlier", 3 * time.Second, true},
		{"not a time", "now", "", 0, true},
		{"from the future", now.Add(time.Minute).Format(time.RFC3339Nano), "", 0, true},
	}
	for _, c := range cases {
		age, pending := requestAge(obj(c.token), c.last, now)
		assert.Equal(t, c.pending, pending, c.name)
		assert.Equal(t, c.age, age, c.name)
	}
}
