package controller

import (
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// outcome is how a pass ended, in the terms the conditions of every kind speak. Each kind
// decides its outcome (conclude for the kinds that apply objects, fleetOutcome for a fleet);
// markOutcome is the one place an outcome becomes conditions.
type outcome struct {
	state outcomeState
	// reason and message of Ready (and of Stalled or Reconciling with it). A success has
	// ReconciliationSucceeded.
	reason, message string
}

type outcomeState int

const (
	// outcomeSucceeded: Ready=True; neither Reconciling nor Stalled.
	outcomeSucceeded outcomeState = iota
	// outcomeStalled: Ready=False and Stalled with the same reason: only a change of spec (or of the
	// package) can help.
	outcomeStalled
	// outcomeRetrying: Ready=False, Reconciling=ProgressingWithRetry: the pass failed, and is tried again.
	outcomeRetrying
	// outcomeProgressing: Ready=False, Reconciling with the same reason: the work goes on by itself
	// (objects becoming available, a fleet's rollout moving, members being written again).
	outcomeProgressing
	// outcomeWaiting: Ready=False, neither Reconciling nor Stalled: the spec holds the work (a
	// fleet's paused rollout).
	outcomeWaiting
)

// markOutcome sets Ready, Reconciling and Stalled from an outcome.
func markOutcome(obj conditions.Setter, o outcome) {
	switch o.state {
	case outcomeSucceeded:
		conditions.MarkTrue(obj, meta.ReadyCondition, v1alpha1.ReconciliationSucceededReason, "%s", o.message)
	default:
		conditions.MarkFalse(obj, meta.ReadyCondition, o.reason, "%s", o.message)
	}
	if o.state == outcomeStalled {
		conditions.MarkStalled(obj, o.reason, "%s", o.message)
	} else {
		conditions.Delete(obj, meta.StalledCondition)
	}
	switch o.state {
	case outcomeRetrying:
		conditions.MarkReconciling(obj, v1alpha1.ProgressingWithRetryReason, "%s", o.message)
	case outcomeProgressing:
		conditions.MarkReconciling(obj, o.reason, "%s", o.message)
	default:
		conditions.Delete(obj, meta.ReconcilingCondition)
	}
}
