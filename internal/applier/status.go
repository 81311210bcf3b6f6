package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// setMappedConditions sets the conditions a pass mapped from applied objects (Package
// Operator's condition-map) on the resource. Their types have a domain prefix, which the
// resource's own conditions never have. Once every phase was reached, a mapped condition no
// object reports any more is removed; until then the ones of phases not reached stay as they
// were last seen.
func setMappedConditions(obj reconciler.Object, res *apply.Result) {
	if res == nil {
		return
	}
	current := map[string]bool{}
	for i := range res.Conditions {
		c := res.Conditions[i]
		c.ObservedGeneration = obj.GetGeneration()
		conditions.Set(obj, &c)
		current[c.Type] = true
	}
	if !res.Complete() {
		return
	}
	for _, c := range append([]metav1.Condition(nil), obj.GetConditions()...) {
		if strings.Contains(c.Type, "/") && !current[c.Type] {
			conditions.Delete(obj, c.Type)
		}
	}
}

// RecordPass stores what an apply pass reports: phases, the current phase, the inventory.
func RecordPass(status *v1alpha1.ApplyStatus, res *apply.Result) {
	if res == nil {
		return
	}
	status.Phases, status.Phase = phasesToStatus(res)
	status.Inventory = inventoryToStatus(res.Inventory)
}

// Conclude sets Ready from the outcome of an apply pass and says when to reconcile again, by
// the one rule (requeueFor): complete → the interval; waiting on availability → iv.progress
// (Applier.progressCheck); failures → the retry interval, with Stalled and the interval when
// only a change of spec or package can help. It never returns an error for the work queue.
func Conclude(ctx context.Context, obj reconciler.Object, res *apply.Result, err error, iv reconciler.Intervals, successMsg string) ctrl.Result {
	setMappedConditions(obj, res)
	switch {
	case err != nil:
		o := reconciler.Failure(err)
		o.Wake = retryWake(err, o, iv)
		return reconciler.SettleFailure(ctx, obj, o, iv)
	case res != nil && !res.Complete() && len(res.Failed()) > 0:
		// The object says waiting will not help (kstatus Failed): reported as a failure at once,
		// not as progress until someone's deadline, and still looked at every progress interval,
		// since a Deployment past its deadline recovers when its pods become ready.
		return reconciler.Settle(obj, reconciler.Outcome{State: reconciler.OutcomeStalled, Reason: v1alpha1.ObjectsFailedReason, Message: failedSummary(res), Wake: iv.Progress}, iv)
	case res != nil && !res.Complete():
		return reconciler.Settle(obj, reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.PhaseProgressingReason, Message: res.Summary()}, iv)
	default:
		return reconciler.Settle(obj, reconciler.Outcome{State: reconciler.OutcomeSucceeded, Message: successMsg}, iv)
	}
}

// retryWake is when a failed apply pass is tried again where its error says more than the retry
// interval does; 0 for a failure that stalls.
func retryWake(err error, o reconciler.Outcome, iv reconciler.Intervals) time.Duration {
	if o.State != reconciler.OutcomeRetrying {
		return 0
	}
	retry := iv.Retry
	var down *hosted.UnavailableError
	if errors.As(err, &down) {
		// Nothing is sent to the hosted cluster before its next probe; a probe that
		// succeeds wakes the resource at once.
		retry = max(time.Until(down.NextProbe)+time.Second, retry)
	}
	var paused *PausedError
	if errors.As(err, &paused) && !paused.until.IsZero() {
		// The pause ends by itself (spec.pausedUntil): come back then, whether or not
		// HyperShift's operator reports it.
		retry = min(retry, time.Until(paused.until)+time.Second)
	}
	if reconciler.IsWaitingForInterval(o.Reason) {
		retry = reconciler.Jittered(iv.Interval)
	}
	return retry
}

// failedSummary names the phase and its objects that failed, for Ready and Stalled.
func failedSummary(res *apply.Result) string {
	p := res.Progressing()
	failed := res.Failed()
	names := make([]string, 0, len(failed))
	for _, f := range failed {
		names = append(names, f.String())
	}
	return fmt.Sprintf("phase %s on %s failed: %s", p.Name, p.Target, strings.Join(names, "; "))
}

// ApplyCommon points into the common part of the status of the kinds that apply objects.
func ApplyCommon(s *v1alpha1.ApplyStatus) reconciler.CommonStatus {
	return reconciler.CommonStatus{Request: &s.ReconcileRequestStatus, ObservedGeneration: &s.ObservedGeneration}
}

// Settled reports whether the outcome of an apply pass is final (Ready or Stalled): the kinds
// that apply objects record their generation as observed then, not while they still work on it.
func Settled(obj reconciler.Object) bool {
	return conditions.IsReady(obj) || conditions.IsStalled(obj)
}

// RecordInventory returns the apply engine's Record hook for a resource's status, saved through r.
func RecordInventory(r *reconciler.Report, status *v1alpha1.ApplyStatus) func(context.Context, apply.Inventory) error {
	return func(ctx context.Context, inv apply.Inventory) error {
		status.Inventory = inventoryToStatus(inv)
		return r.Save(ctx)
	}
}

// maxNotAvailable bounds the objects listed per phase in status, to keep it small.
const maxNotAvailable = 10

// phasesToStatus reports each phase of an apply pass.
// maxNotAvailableReason bounds each reason in status.phases[].notAvailable.
const maxNotAvailableReason = 1024

func phasesToStatus(res *apply.Result) (phases []v1alpha1.PhaseStatus, current string) {
	current = "Complete"
	for _, p := range res.Phases {
		ps := v1alpha1.PhaseStatus{Name: p.Name, Class: p.Class, State: p.State}
		for i, na := range p.NotAvailable {
			if i == maxNotAvailable {
				ps.NotAvailable = append(ps.NotAvailable, v1alpha1.ObjectStatus{Object: "…", Reason: fmt.Sprintf("and %d more", len(p.NotAvailable)-i)})
				break
			}
			// The reason quotes the object's status, which whoever writes the object writes.
			ps.NotAvailable = append(ps.NotAvailable, v1alpha1.ObjectStatus{Object: na.Ref.String(), Reason: reconciler.BoundMessage(na.Reason, maxNotAvailableReason)})
		}
		if p.State != v1alpha1.PhaseComplete && current == "Complete" {
			current = p.Name
		}
		phases = append(phases, ps)
	}
	if len(res.Phases) == 0 {
		current = ""
	}
	return phases, current
}

// historyLimit bounds status.history.
const historyLimit = 5

func PushHistory(h []v1alpha1.RevisionHistoryEntry, revision, configDigest string) []v1alpha1.RevisionHistoryEntry {
	entry := v1alpha1.RevisionHistoryEntry{Revision: revision, ConfigDigest: configDigest, AppliedAt: metav1.Now()}
	h = append([]v1alpha1.RevisionHistoryEntry{entry}, h...)
	if len(h) > historyLimit {
		h = h[:historyLimit]
	}
	return h
}
