package controller

import (
	"testing"

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
