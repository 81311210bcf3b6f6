package controller

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

// TestRequeueFor: the one rule for when a reconcile comes back, for every kind: the outcome's
// own wake when it has one, else by its state.
func TestRequeueFor(t *testing.T) {
	t.Parallel()
	iv := intervals{interval: time.Hour, retry: time.Minute, progress: time.Second}
	cases := []struct {
		name     string
		o        outcome
		min, max time.Duration
	}{
		{"succeeded: the interval, jittered", outcome{state: outcomeSucceeded}, iv.interval * 9 / 10, iv.interval * 11 / 10},
		{"stalled: the interval, jittered", outcome{state: outcomeStalled}, iv.interval * 9 / 10, iv.interval * 11 / 10},
		{"waiting: the interval, jittered", outcome{state: outcomeWaiting}, iv.interval * 9 / 10, iv.interval * 11 / 10},
		{"retrying: the retry interval", outcome{state: outcomeRetrying}, iv.retry, iv.retry},
		{"progressing: the progress interval", outcome{state: outcomeProgressing}, iv.progress, iv.progress},
		{"its own wake, sooner", outcome{state: outcomeSucceeded, wake: time.Second}, time.Second, time.Second},
		{"its own wake, later", outcome{state: outcomeRetrying, wake: 2 * time.Hour}, 2 * time.Hour, 2 * time.Hour},
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
	stalls := failure(fmt.Errorf("spec.selector: %w", &stageError{reason: v1alpha1.InvalidSpecReason, err: errors.New("bad")}))
	assert.Equal(t, outcome{state: outcomeStalled, reason: v1alpha1.InvalidSpecReason, message: "spec.selector: bad"}, stalls)
	retried := failure(errors.New("connection refused"))
	assert.Equal(t, outcome{state: outcomeRetrying, reason: v1alpha1.ApplyFailedReason, message: "connection refused"}, retried)
}
