package reconcilertest

import (
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conditions is what an outcome leaves of Ready, Reconciling and Stalled ("" for absent).
type Conditions struct {
	Ready                        metav1.ConditionStatus
	ReadyReason                  string
	ReconcilingReason, StalledBy string
}

// AssertConditions asserts what obj shows of Ready, Reconciling and Stalled.
func AssertConditions(t assert.TestingT, obj conditions.Getter, want Conditions) {
	ready := conditions.Get(obj, meta.ReadyCondition)
	if assert.NotNil(t, ready, "Ready") {
		assert.Equal(t, want.Ready, ready.Status, "Ready status")
		assert.Equal(t, want.ReadyReason, ready.Reason, "Ready reason")
	}
	assert.Equal(t, want.ReconcilingReason, conditions.GetReason(obj, meta.ReconcilingCondition), "Reconciling reason")
	assert.Equal(t, want.ReconcilingReason != "", conditions.Has(obj, meta.ReconcilingCondition), "Reconciling present")
	assert.Equal(t, want.StalledBy, conditions.GetReason(obj, meta.StalledCondition), "Stalled reason")
	assert.Equal(t, want.StalledBy != "", conditions.Has(obj, meta.StalledCondition), "Stalled present")
}
