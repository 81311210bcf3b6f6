package controller

import (
	"context"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// statusObject is any pkgsync resource.
type statusObject interface {
	client.Object
	conditions.Setter
}

// kindSteps is what one kind does within the lifecycle every kind shares.
type kindSteps[T statusObject] struct {
	// status points into the part of the status every kind has.
	status func(obj T) commonStatus
	// suspended reports spec.suspend.
	suspended func(obj T) bool
	// observed reports whether the outcome a reconcile that returned no error leaves is the
	// outcome of the resource's generation: the lifecycle then records the generation as
	// status.observedGeneration. That is the one rule; what counts as an outcome is the kind's
	// (see settled and the fleet's steps).
	observed func(obj T) bool
	// pass reconciles a resource that is neither being deleted nor suspended, and concludes.
	// lastHandled is the reconcile request handled before this reconcile acknowledged the
	// current one. An error it returns is a failure the lifecycle reports (failed).
	pass func(ctx context.Context, obj T, rep *report, lastHandled string) (ctrl.Result, error)
	// finalize makes one deletion pass for a resource being deleted and removes pkgsync's
	// finalizer once nothing of it is left: the kinds that apply objects tear down their
	// inventory (teardownInventory), a fleet deletes its members and waits for them. An error
	// it returns is reported as pass's are.
	finalize func(ctx context.Context, obj T) (ctrl.Result, error)
	// intervals are the resource's intervals, for the requeue rule (requeueFor).
	intervals func(obj T) intervals
	// announce, when set, replaces announce: the event emitted when Ready changes.
	announce func(rec record.EventRecorder, obj T, old *metav1.Condition)
	// copyStatus, when set, copies the status of src to dst, and the lifecycle then remembers
	// the status it last wrote of each resource and reconciles from that rather than from the
	// cache's copy, which may not show the last write yet. A kind whose decisions read its own
	// status (the fleet: target, stable revision, partition times) and that is woken often
	// (by every member's change) sets it; the write was this controller's, the only writer of
	// the status, so what it remembers is never older than what the cache shows.
	copyStatus func(dst, src T)
	// gone, when set, is told that a resource is gone: what is kept for it alone can go.
	gone func(key types.NamespacedName)
}

// commonStatus points into the part of the status every kind has besides its conditions: the
// reconcile request last handled and the generation last observed.
type commonStatus struct {
	request            *meta.ReconcileRequestStatus
	observedGeneration *int64
}

// lifecycle reconciles one kind the way every pkgsync kind is reconciled: read the resource,
// report status through the patch helper, finalize on deletion, add the finalizer before
// anything is applied, stop while suspended, then run the kind's own pass.
type lifecycle[T statusObject] struct {
	lifecycleBase
	kind      string
	newObject func() T
	steps     kindSteps[T]
	// written holds, for kinds with copyStatus, each resource as its status was last written.
	written sync.Map // types.NamespacedName → T
}

// lifecycleBase is what the lifecycles of every kind share.
type lifecycleBase struct {
	client   client.Client
	recorder record.EventRecorder
	metrics  runtimectrl.Metrics
}

func newLifecycle[T statusObject](base lifecycleBase, kind string, newObject func() T, steps kindSteps[T]) *lifecycle[T] {
	return &lifecycle[T]{lifecycleBase: base, kind: kind, newObject: newObject, steps: steps}
}

// Reconcile implements reconcile.Reconciler.
func (l *lifecycle[T]) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := l.newObject()
	if err := l.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			l.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	l.recall(obj)
	rep := beginReport(l.client, obj, l.steps.status(obj), l.metrics, l.recorder)
	rep.observed = func() bool { return l.steps.observed(obj) }
	if l.steps.announce != nil {
		rep.announce = func(old *metav1.Condition) { l.steps.announce(l.recorder, obj, old) }
	}
	defer func() {
		retErr = rep.finish(ctx, retErr)
		l.remember(obj, rep.written)
	}()

	if !obj.GetDeletionTimestamp().IsZero() {
		res, err := l.steps.finalize(ctx, obj)
		return l.failed(ctx, obj, rep, res, err)
	}
	if err := rep.ensureFinalizer(ctx); err != nil {
		// The lifecycle's own write of the resource: status cannot report it (see failed).
		return ctrl.Result{}, err
	}
	suspended := l.steps.suspended(obj)
	l.metrics.RecordSuspend(ctx, obj, suspended)
	lastHandled := rep.status.request.GetLastHandledReconcileRequest()
	// The request is acknowledged in the final status patch, not in the ones the pass writes
	// on the way (the intended inventory): a controller killed mid-pass handles it again.
	rep.acknowledge = true
	if suspended {
		ctrl.LoggerFrom(ctx).V(1).Info("suspended, nothing written")
		return ctrl.Result{}, nil
	}
	res, err := l.steps.pass(ctx, obj, rep, lastHandled)
	return l.failed(ctx, obj, rep, res, err)
}

// failed reports a step that failed with err, for every kind the way conclude reports a failed
// apply pass: Ready=False with the reason the error maps to (failure), and Reconciling=
// ProgressingWithRetry and the retry interval, or Stalled and the interval (requeueFor). The
// error is not returned: the work queue's backoff (5 ms doubling to 16 minutes) would retry a
// registry outage in milliseconds and a long one after a quarter of an hour, and leave Ready as
// it was (True, for a fleet that had converged). A retried failure is not the generation's
// outcome, whatever the kind says (report.finish).
//
// What goes to the work queue is only what the resource's status cannot report, as it did
// before for every kind: a read of the resource that failed (Reconcile), and the lifecycle's
// own writes of it (adding the finalizer, the status patch of report.finish), whose condition
// would go in the very request that failed. Those writes are merge patches without a
// resourceVersion, so a concurrent writer never makes them conflict (optimistic concurrency has
// nothing to retry there); what fails them is an API server that is unavailable or refuses,
// which the backoff retries at once and then less often. A conflict of a write a step guards by
// resourceVersion (a fleet's finalizer removal, a member's release) is retried by the step on a
// fresh read, a few times, before the step fails with it; that failure is reported as any other.
func (l *lifecycle[T]) failed(ctx context.Context, obj T, rep *report, res ctrl.Result, err error) (ctrl.Result, error) {
	if err == nil {
		return res, nil
	}
	o := failure(err)
	rep.failed = o.state == outcomeRetrying
	return settleFailure(ctx, obj, o, l.steps.intervals(obj)), nil
}

// recall puts the status last written of obj in place of the cache's, for kinds that keep it.
func (l *lifecycle[T]) recall(obj T) {
	if l.steps.copyStatus == nil {
		return
	}
	if w, ok := l.written.Load(client.ObjectKeyFromObject(obj)); ok && w.(T).GetUID() == obj.GetUID() {
		l.steps.copyStatus(obj, w.(T))
	}
}

// remember keeps the status written of obj, or forgets it when the write failed (what the API
// server holds is not known) or the resource is gone.
func (l *lifecycle[T]) remember(obj T, written bool) {
	if l.steps.copyStatus == nil {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	if !written || (!obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerName)) {
		l.written.Delete(key)
		return
	}
	kept := l.newObject()
	kept.SetUID(obj.GetUID())
	l.steps.copyStatus(kept, obj)
	l.written.Store(key, kept)
}

// forget drops what is kept for a resource that is gone.
func (l *lifecycle[T]) forget(key types.NamespacedName) {
	l.written.Delete(key)
	if l.steps.gone != nil {
		l.steps.gone(key)
	}
}

// requestAge says how old a tag resolution (made by any resource) may be to answer a pending
// reconcile request (reconcile.fluxcd.io/requestedAt, as `flux reconcile` writes it): one made
// after the request, so that a whole wave of resources asked at once shares one answer that
// is still newer than what was asked for (Flux's tokens are times; a token that is not one
// asks the registry). pending is false when the request was handled before (lastHandled):
// the kind's own rule applies then (resolveMaxAge for packages, half the interval for a fleet).
func requestAge(obj client.Object, lastHandled string, now time.Time) (maxAge time.Duration, pending bool) {
	token, ok := meta.ReconcileAnnotationValue(obj.GetAnnotations())
	if !ok || token == lastHandled {
		return 0, false
	}
	requested, err := time.Parse(time.RFC3339Nano, token)
	if err != nil {
		return 0, true
	}
	return max(now.Sub(requested), 0), true
}
