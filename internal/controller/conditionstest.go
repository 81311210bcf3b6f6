package controller

import (
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// wantConditions is what an outcome leaves of Ready, Reconciling and Stalled ("" for absent).
type wantConditions struct {
	ready                        metav1.ConditionStatus
	readyReason                  string
	reconcilingReason, stalledBy string
}

// assertConditions asserts what obj shows of Ready, Reconciling and Stalled.
func assertConditions(t assert.TestingT, obj conditions.Getter, want wantConditions) {
	ready := conditions.Get(obj, meta.ReadyCondition)
	if assert.NotNil(t, ready, "Ready") {
		assert.Equal(t, want.ready, ready.Status, "Ready status")
		assert.Equal(t, want.readyReason, ready.Reason, "Ready reason")
	}
	assert.Equal(t, want.reconcilingReason, conditions.GetReason(obj, meta.ReconcilingCondition), "Reconciling reason")
	assert.Equal(t, want.reconcilingReason != "", conditions.Has(obj, meta.ReconcilingCondition), "Reconciling present")
	assert.Equal(t, want.stalledBy, conditions.GetReason(obj, meta.StalledCondition), "Stalled reason")
	assert.Equal(t, want.stalledBy != "", conditions.Has(obj, meta.StalledCondition), "Stalled present")
}
