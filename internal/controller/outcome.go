package controller

import (
	"context"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// outcome is how a pass ended, in the terms the conditions of every kind speak, and when the
// resource is looked at again. Each kind decides its outcome (conclude for the kinds that apply
// objects, fleetOutcome for a fleet, failure for a step that failed); markOutcome is the one
// place an outcome becomes conditions, requeueFor the one place it becomes a ctrl.Result.
type outcome struct {
	state outcomeState
	// reason and message of Ready (and of Stalled or Reconciling with it). A success has
	// ReconciliationSucceeded.
	reason, message string
	// wake, when set, is when to come back instead of the state's interval (requeueFor): a wake
	// of the outcome's own, which the state cannot know: an open circuit's next probe, the end
	// of a pause, a soak or a deadline, a wait that only the interval can end.
	wake time.Duration
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

// intervals are what the requeue rule reads of a resource: its interval (spec.interval; a
// fleet's template's), its retry interval (spec.retryInterval or --retry-interval) and its
// progress interval (how soon a pass that waits on availability or teardown is looked at again:
// --progress-interval, or the quick checks of a phase's first seconds).
type intervals struct {
	interval, retry, progress time.Duration
}

// requeueFor is the one rule for when a reconcile comes back, for every kind: at the outcome's
// own wake when it has one; otherwise a failure that is retried after the retry interval, work
// that goes on by itself after the progress interval, and a success, a stall or a wait the spec
// holds after the interval, jittered so that resources created together do not come back
// together (a stall is looked at again although only a change can help: a change wakes it at
// once, the interval only bounds how long a missed one goes unseen). A failure is never returned
// to the work queue for its backoff: a registry or a hosted cluster that comes back is noticed
// within one retry interval, and the condition says when that is.
func requeueFor(o outcome, iv intervals) ctrl.Result {
	switch {
	case o.wake > 0:
		return ctrl.Result{RequeueAfter: o.wake}
	case o.state == outcomeRetrying:
		return ctrl.Result{RequeueAfter: iv.retry}
	case o.state == outcomeProgressing:
		return ctrl.Result{RequeueAfter: iv.progress}
	}
	return ctrl.Result{RequeueAfter: jittered(iv.interval)}
}

// settle ends a pass with an outcome: its conditions set, and when to come back.
func settle(obj conditions.Setter, o outcome, iv intervals) ctrl.Result {
	markOutcome(obj, o)
	return requeueFor(o, iv)
}

// failure is the outcome of a step that failed with err, for every kind: Ready=False with the
// reason reasonFor maps err to, Stalled when only a change of spec or package can help
// (isStalling), retried otherwise.
func failure(err error) outcome {
	reason := reasonFor(err)
	if isStalling(reason) {
		return outcome{state: outcomeStalled, reason: reason, message: err.Error()}
	}
	return outcome{state: outcomeRetrying, reason: reason, message: err.Error()}
}

// settleFailure ends a pass with the outcome of a failure (failure, with the wake its kind gave
// it) and logs it: the failure is in status, not in the work queue's error log.
func settleFailure(ctx context.Context, obj conditions.Setter, o outcome, iv intervals) ctrl.Result {
	res := settle(obj, o, iv)
	log := ctrl.LoggerFrom(ctx)
	if o.state == outcomeStalled {
		log.Info("reconciliation stalled", "reason", o.reason, "error", o.message)
	} else {
		log.Info("reconciliation failed, will retry", "reason", o.reason, "error", o.message, "retryIn", res.RequeueAfter.String())
	}
	return res
}
