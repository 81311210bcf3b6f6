package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
)

func TestPhasesToStatusCapsObjects(t *testing.T) {
	t.Parallel()
	res := &apply.Result{Phases: []apply.PhaseResult{
		{Name: "one", State: v1alpha1.PhaseComplete},
		{Name: "two", State: v1alpha1.PhaseProgressing},
		{Name: "three", State: v1alpha1.PhasePending},
	}}
	for i := range 15 {
		res.Phases[1].NotAvailable = append(res.Phases[1].NotAvailable, apply.ObjectStatus{Ref: apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Name: fmt.Sprint(i)}, Reason: "waiting"})
	}
	phases, current := phasesToStatus(res)
	assert.Equal(t, "two", current)
	require.Len(t, phases, 3)
	assert.Len(t, phases[1].NotAvailable, maxNotAvailable+1)
	assert.Equal(t, "and 5 more", phases[1].NotAvailable[maxNotAvailable].Reason)
}
