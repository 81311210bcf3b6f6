package reconciler

import (
	"errors"
	"fmt"
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
		o                          Outcome
		ready                      metav1.ConditionStatus
		readyReason                string
		reconcilingReason, stalled string // "" for absent
	}{
		{Outcome{State: OutcomeSucceeded, Message: "done"}, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "", ""},
		{Outcome{State: OutcomeStalled, Reason: v1alpha1.RolloutHaltedReason, Message: "halted"}, metav1.ConditionFalse, v1alpha1.RolloutHaltedReason, "", v1alpha1.RolloutHaltedReason},
		{Outcome{State: OutcomeRetrying, Reason: v1alpha1.PullFailedReason, Message: "down"}, metav1.ConditionFalse, v1alpha1.PullFailedReason, v1alpha1.ProgressingWithRetryReason, ""},
		{Outcome{State: OutcomeProgressing, Reason: v1alpha1.RolloutProgressingReason, Message: "1/2/3"}, metav1.ConditionFalse, v1alpha1.RolloutProgressingReason, v1alpha1.RolloutProgressingReason, ""},
		{Outcome{State: OutcomeWaiting, Reason: v1alpha1.RolloutPausedReason, Message: "paused"}, metav1.ConditionFalse, v1alpha1.RolloutPausedReason, "", ""},
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
			MarkOutcome(f, c.o)
			ready := conditions.Get(f, meta.ReadyCondition)
			if assert.NotNil(t, ready) {
				assert.Equal(t, c.ready, ready.Status, c.readyReason)
				assert.Equal(t, c.readyReason, ready.Reason)
				assert.Equal(t, c.o.Message, ready.Message)
			}
			assert.Equal(t, c.reconcilingReason != "", conditions.Has(f, meta.ReconcilingCondition), c.readyReason)
			assert.Equal(t, c.reconcilingReason, conditions.GetReason(f, meta.ReconcilingCondition), c.readyReason)
			assert.Equal(t, c.stalled != "", conditions.Has(f, meta.StalledCondition), c.readyReason)
			assert.Equal(t, c.stalled, conditions.GetReason(f, meta.StalledCondition), c.readyReason)
		}
	}
}

// TestRequeueFor: the one rule for when a reconcile comes back, for every kind: the outcome's
// own wake when it has one, else by its state.
func TestRequeueFor(t *testing.T) {
	t.Parallel()
	iv := Intervals{Interval: time.Hour, Retry: time.Minute, Progress: time.Second}
	cases := []struct {
		name     string
		o        Outcome
		min, max time.Duration
	}{
		{"succeeded: the interval, jittered", Outcome{State: OutcomeSucceeded}, iv.Interval * 9 / 10, iv.Interval * 11 / 10},
		{"stalled: the interval, jittered", Outcome{State: OutcomeStalled}, iv.Interval * 9 / 10, iv.Interval * 11 / 10},
		{"waiting: the interval, jittered", Outcome{State: OutcomeWaiting}, iv.Interval * 9 / 10, iv.Interval * 11 / 10},
		{"retrying: the retry interval", Outcome{State: OutcomeRetrying}, iv.Retry, iv.Retry},
		{"progressing: the progress interval", Outcome{State: OutcomeProgressing}, iv.Progress, iv.Progress},
		{"its own wake, sooner", Outcome{State: OutcomeSucceeded, Wake: time.Second}, time.Second, time.Second},
		{"its own wake, later", Outcome{State: OutcomeRetrying, Wake: 2 * time.Hour}, 2 * time.Hour, 2 * time.Hour},
	}
	for _, c := range cases {
		res := requeueFor(c.o, iv)
		assert.GreaterOrEqual(t, res.RequeueAfter, c.min, c.name)
		assert.LessOrEqual(t, res.RequeueAfter, c.max, c.name)
	}
}

// TestFailure: a failure stalls when only a change can help, and is retried otherwise, with the
// reason its error maps to and its message.
func TestFailure(t *testing.T) {
	t.Parallel()
	stalls := Failure(fmt.Errorf("spec.selector: %w", &StageError{Reason: v1alpha1.InvalidSpecReason, Err: errors.New("bad")}))
	assert.Equal(t, Outcome{State: OutcomeStalled, Reason: v1alpha1.InvalidSpecReason, Message: "spec.selector: bad"}, stalls)
	retried := Failure(errors.New("connection refused"))
	assert.Equal(t, Outcome{State: OutcomeRetrying, Reason: v1alpha1.ApplyFailedReason, Message: "connection refused"}, retried)
}
