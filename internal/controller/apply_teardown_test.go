package controller

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
)

// TestTeardownFailureIsRetried: a teardown pass that fails concludes through the one outcome
// mapping, as every failure that is tried again: Ready=False with the failure's reason,
// Reconciling=ProgressingWithRetry, no Stalled left from before the deletion.
func TestTeardownFailureIsRetried(t *testing.T) {
	t.Parallel()
	obj := &v1alpha1.ClusterPackage{}
	obj.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	markOutcome(obj, outcome{state: outcomeStalled, reason: v1alpha1.RenderFailedReason, message: "before the deletion"})
	status := &obj.Status.ApplyStatus
	status.Inventory = &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{{Name: "deploy", Objects: []string{"not-an-id"}}}}

	done, err := teardownPass(t.Context(), &applier{}, nil, obj, apply.Owner{Kind: v1alpha1.ClusterPackageKind, Name: "p"}, "", status, Options{}.withDefaults())
	require.Error(t, err)
	assert.False(t, done)
	ready := conditions.Get(obj, meta.ReadyCondition)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.ApplyFailedReason, ready.Reason)
	assert.Contains(t, ready.Message, "deleting: ")
	assert.Equal(t, v1alpha1.ProgressingWithRetryReason, conditions.GetReason(obj, meta.ReconcilingCondition))
	assert.False(t, conditions.Has(obj, meta.StalledCondition))
}
