package reconciler

import (
	"context"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Outcome is how a pass ended, in the terms the conditions of every kind speak, and when the
// resource is looked at again. Each kind decides its outcome (conclude for the kinds that apply
// objects, fleetOutcome for a fleet, failure for a step that failed); MarkOutcome is the one
// place an outcome becomes conditions, requeueFor the one place it becomes a ctrl.Result.
type Outcome struct {
	State OutcomeState
	// Reason and message of Ready (and of Stalled or Reconciling with it). A success has
	// ReconciliationSucceeded.
	Reason, Message string
	// Wake, when set, is when to come back instead of the state's interval (requeueFor): a wake
	// of the outcome's own, which the state cannot know: an open circuit's next probe, the end
	// of a pause, a soak or a deadline, a wait that only the interval can end.
	Wake time.Duration
}

type OutcomeState int

const (
	// OutcomeSucceeded: Ready=True; neither Reconciling nor Stalled.
	OutcomeSucceeded OutcomeState = iota
	// OutcomeStalled: Ready=False and Stalled with the same reason: only a change of spec (or of the
	// package) can help.
	OutcomeStalled
	// OutcomeRetrying: Ready=False, Reconciling=ProgressingWithRetry: the pass failed, and is tried again.
	OutcomeRetrying
	// OutcomeProgressing: Ready=False, Reconciling with the same reason: the work goes on by itself
	// (objects becoming available, a fleet's rollout moving, members being written again).
	OutcomeProgressing
	// OutcomeWaiting: Ready=False, neither Reconciling nor Stalled: the spec holds the work (a
	// fleet's paused rollout).
	OutcomeWaiting
)

// MarkOutcome sets Ready, Reconciling and Stalled from an outcome.
func MarkOutcome(obj conditions.Setter, o Outcome) {
	switch o.State {
	case OutcomeSucceeded:
		conditions.MarkTrue(obj, meta.ReadyCondition, v1alpha1.ReconciliationSucceededReason, "%s", o.Message)
	default:
		conditions.MarkFalse(obj, meta.ReadyCondition, o.Reason, "%s", o.Message)
	}
	if o.State == OutcomeStalled {
		conditions.MarkStalled(obj, o.Reason, "%s", o.Message)
	} else {
		conditions.Delete(obj, meta.StalledCondition)
	}
	switch o.State {
	case OutcomeRetrying:
		conditions.MarkReconciling(obj, v1alpha1.ProgressingWithRetryReason, "%s", o.Message)
	case OutcomeProgressing:
		conditions.MarkReconciling(obj, o.Reason, "%s", o.Message)
	default:
		conditions.Delete(obj, meta.ReconcilingCondition)
	}
}

// Intervals are what the requeue rule reads of a resource: its interval (spec.interval; a
// fleet's template's), its retry interval (spec.retryInterval or --retry-interval) and its
// progress interval (how soon a pass that waits on availability or teardown is looked at again:
// --progress-interval, or the quick checks of a phase's first seconds).
type Intervals struct {
	Interval, Retry, Progress time.Duration
}

// requeueFor is the one rule for when a reconcile comes back, for every kind: at the outcome's
// own wake when it has one; otherwise a failure that is retried after the retry interval, work
// that goes on by itself after the progress interval, and a success, a stall or a wait the spec
// holds after the interval, Jittered so that resources created together do not come back
// together (a stall is looked at again although only a change can help: a change wakes it at
// once, the interval only bounds how long a missed one goes unseen). A failure is never returned
// to the work queue for its backoff: a registry or a hosted cluster that comes back is noticed
// within one retry interval, and the condition says when that is.
func requeueFor(o Outcome, iv Intervals) ctrl.Result {
	switch {
	case o.Wake > 0:
		return ctrl.Result{RequeueAfter: o.Wake}
	case o.State == OutcomeRetrying:
		return ctrl.Result{RequeueAfter: iv.Retry}
	case o.State == OutcomeProgressing:
		return ctrl.Result{RequeueAfter: iv.Progress}
	}
	return ctrl.Result{RequeueAfter: Jittered(iv.Interval)}
}

// Settle ends a pass with an outcome: its conditions set, and when to come back.
func Settle(obj conditions.Setter, o Outcome, iv Intervals) ctrl.Result {
	MarkOutcome(obj, o)
	return requeueFor(o, iv)
}

// Failure is the outcome of a step that failed with err, for every kind: Ready=False with the
// reason ReasonFor maps err to, Stalled when only a change of spec or package can help
// (IsStalling), retried otherwise.
func Failure(err error) Outcome {
	reason := ReasonFor(err)
	if IsStalling(reason) {
		return Outcome{State: OutcomeStalled, Reason: reason, Message: err.Error()}
	}
	return Outcome{State: OutcomeRetrying, Reason: reason, Message: err.Error()}
}

// SettleFailure ends a pass with the outcome of a failure (failure, with the wake its kind gave
// it) and logs it: the failure is in status, not in the work queue's error log.
func SettleFailure(ctx context.Context, obj conditions.Setter, o Outcome, iv Intervals) ctrl.Result {
	res := Settle(obj, o, iv)
	log := ctrl.LoggerFrom(ctx)
	if o.State == OutcomeStalled {
		log.Info("reconciliation stalled", "reason", o.Reason, "error", o.Message)
	} else {
		log.Info("reconciliation failed, will retry", "reason", o.Reason, "error", o.Message, "retryIn", res.RequeueAfter.String())
	}
	return res
}
