package reconciler

import (
	"context"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Object is any pkgsync resource.
type Object interface {
	client.Object
	conditions.Setter
}

// Steps is what one kind does within the lifecycle every kind shares.
type Steps[T Object] struct {
	// Status points into the part of the status every kind has.
	Status func(obj T) CommonStatus
	// Suspended reports spec.suspend.
	Suspended func(obj T) bool
	// Observed reports whether the outcome a reconcile that returned no error leaves is the
	// outcome of the resource's generation: the lifecycle then records the generation as
	// status.observedGeneration. That is the one rule; what counts as an outcome is the kind's
	// (see settled and the fleet's steps).
	Observed func(obj T) bool
	// Pass reconciles a resource that is neither being deleted nor suspended, and concludes.
	// lastHandled is the reconcile request handled before this reconcile acknowledged the
	// current one. An error it returns is a failure the lifecycle reports (failed).
	Pass func(ctx context.Context, obj T, rep *Report, lastHandled string) (ctrl.Result, error)
	// Finalize makes one deletion pass for a resource being deleted and removes pkgsync's
	// finalizer once nothing of it is left: the kinds that apply objects tear down their
	// inventory (applier.TeardownInventory), a fleet deletes its members and waits for them. An error
	// it returns is reported as pass's are.
	Finalize func(ctx context.Context, obj T) (ctrl.Result, error)
	// Intervals are the resource's intervals, for the requeue rule (requeueFor).
	Intervals func(obj T) Intervals
	// CopyStatus, when set, copies the status of src to dst, and the lifecycle then remembers
	// the status it last wrote of each resource and reconciles from that rather than from the
	// cache's copy, which may not show the last write yet. A kind whose decisions read its own
	// status (the fleet: target, stable revision, partition times) and that is woken often
	// (by every member's change) sets it; the write was this controller's, the only writer of
	// the status, so what it remembers is never older than what the cache shows.
	CopyStatus func(dst, src T)
	// Gone, when set, is told that a resource is gone: what is kept for it alone can go.
	Gone func(key types.NamespacedName)
}

// CommonStatus points into the part of the status every kind has besides its conditions: the
// reconcile request last handled and the generation last observed.
type CommonStatus struct {
	Request            *meta.ReconcileRequestStatus
	ObservedGeneration *int64
}

// Lifecycle reconciles one kind the way every pkgsync kind is reconciled: read the resource,
// report status through the patch helper, finalize on deletion, add the finalizer before
// anything is applied, stop while suspended, then run the kind's own pass.
type Lifecycle[T Object] struct {
	Base
	kind      string
	newObject func() T
	steps     Steps[T]
	// Written holds, for kinds with CopyStatus, each resource as its status was last written.
	Written Written[types.NamespacedName, T]
}

// Base is what the lifecycles of every kind share.
type Base struct {
	Client   client.Client
	Recorder record.EventRecorder
	Metrics  runtimectrl.Metrics
}

func New[T Object](base Base, kind string, newObject func() T, steps Steps[T]) *Lifecycle[T] {
	return &Lifecycle[T]{Base: base, kind: kind, newObject: newObject, steps: steps}
}

// Reconcile implements reconcile.Reconciler.
func (l *Lifecycle[T]) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := l.newObject()
	if err := l.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			l.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	l.recall(obj)
	rep := BeginReport(l.Client, obj, l.steps.Status(obj), l.Metrics, l.Recorder)
	rep.observed = func() bool { return l.steps.Observed(obj) }
	defer func() {
		retErr = rep.finish(ctx, retErr)
		l.remember(obj, rep.written)
	}()

	if !obj.GetDeletionTimestamp().IsZero() {
		res, err := l.steps.Finalize(ctx, obj)
		return l.failed(ctx, obj, rep, res, err)
	}
	if err := rep.ensureFinalizer(ctx); err != nil {
		// The lifecycle's own write of the resource: status cannot report it (see failed).
		return ctrl.Result{}, err
	}
	suspended := l.steps.Suspended(obj)
	l.Metrics.RecordSuspend(ctx, obj, suspended)
	lastHandled := rep.status.Request.GetLastHandledReconcileRequest()
	// The request is acknowledged in the final status patch, not in the ones the pass writes
	// on the way (the intended inventory): a controller killed mid-pass handles it again.
	rep.acknowledge = true
	if suspended {
		ctrl.LoggerFrom(ctx).V(1).Info("suspended, nothing written")
		return ctrl.Result{}, nil
	}
	res, err := l.steps.Pass(ctx, obj, rep, lastHandled)
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
func (l *Lifecycle[T]) failed(ctx context.Context, obj T, rep *Report, res ctrl.Result, err error) (ctrl.Result, error) {
	if err == nil {
		return res, nil
	}
	o := Failure(err)
	rep.failed = o.State == OutcomeRetrying
	return SettleFailure(ctx, obj, o, l.steps.Intervals(obj)), nil
}

// recall puts the status last written of obj in place of the cache's, for kinds that keep it.
func (l *Lifecycle[T]) recall(obj T) {
	if l.steps.CopyStatus == nil {
		return
	}
	// What was written of another object of the same name (deleted and created again) is
	// forgotten.
	w, ok := l.Written.Pending(client.ObjectKeyFromObject(obj), func(w T) bool { return w.GetUID() != obj.GetUID() })
	if ok {
		l.steps.CopyStatus(obj, w)
	}
}

// remember keeps the status written of obj, or forgets it when the write failed (what the API
// server holds is not known) or the resource is gone.
func (l *Lifecycle[T]) remember(obj T, written bool) {
	if l.steps.CopyStatus == nil {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	if !written || (!obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerName)) {
		l.Written.Drop(key)
		return
	}
	kept := l.newObject()
	kept.SetUID(obj.GetUID())
	l.steps.CopyStatus(kept, obj)
	l.Written.Remember(key, kept)
}

// forget drops what is kept for a resource that is gone.
func (l *Lifecycle[T]) forget(key types.NamespacedName) {
	l.Written.Drop(key)
	if l.steps.Gone != nil {
		l.steps.Gone(key)
	}
}

// RequestAge says how old a tag resolution (made by any resource) may be to answer a pending
// reconcile request (reconcile.fluxcd.io/requestedAt, as `flux reconcile` writes it): one made
// after the request, so that a whole wave of resources asked at once shares one answer that
// is still newer than what was asked for (Flux's tokens are times; a token that is not one
// asks the registry). pending is false when the request was handled before (lastHandled):
// the kind's own rule applies then (resolveMaxAge for packages, half the interval for a fleet).
func RequestAge(obj client.Object, lastHandled string, now time.Time) (maxAge time.Duration, pending bool) {
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
