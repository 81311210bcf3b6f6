package controller

import (
	"context"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// kindSteps is what one kind does within the lifecycle every kind shares.
type kindSteps[T statusObject] struct {
	// rolloutStatus is the part of the status every kind has.
	rolloutStatus func(obj T) *v1alpha1.RolloutStatus
	// serviceAccount is what the resource impersonates on the management cluster ("" for none).
	serviceAccount func(obj T) string
	// suspended reports spec.suspend.
	suspended func(obj T) bool
	// pass reconciles a resource that is neither being deleted nor suspended, and concludes.
	// lastHandled is the reconcile request handled before this reconcile acknowledged the
	// current one.
	pass func(ctx context.Context, obj T, rep *report, lastHandled string) (ctrl.Result, error)
	// deleting, when set, is told that the resource is being deleted (before its teardown):
	// what is kept for it alone can go.
	deleting func(obj T)
}

// lifecycle reconciles one kind the way every pkgsync kind is reconciled: read the resource,
// report status through the patch helper, tear down on deletion, add the finalizer before
// anything is applied, stop while suspended, then run the kind's own pass.
type lifecycle[T statusObject] struct {
	lifecycleBase
	kind      string
	newObject func() T
	steps     kindSteps[T]
}

// lifecycleBase is what the lifecycles of every kind share.
type lifecycleBase struct {
	client    client.Client
	apiReader client.Reader
	recorder  record.EventRecorder
	metrics   runtimectrl.Metrics
	options   Options
	rollouts  *rollouts
}

func newLifecycle[T statusObject](base lifecycleBase, kind string, newObject func() T, steps kindSteps[T]) *lifecycle[T] {
	return &lifecycle[T]{lifecycleBase: base, kind: kind, newObject: newObject, steps: steps}
}

// Reconcile implements reconcile.Reconciler.
func (l *lifecycle[T]) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := l.newObject()
	if err := l.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	status := l.steps.rolloutStatus(obj)
	rep := beginReport(l.client, obj, status, l.metrics, l.recorder)
	defer func() { retErr = rep.finish(ctx, retErr) }()

	if !obj.GetDeletionTimestamp().IsZero() {
		if l.steps.deleting != nil {
			l.steps.deleting(obj)
		}
		return finalize(ctx, l.rollouts, l.apiReader, obj, ownerOf(obj, l.kind), l.steps.serviceAccount(obj), status, l.options)
	}
	if err := rep.ensureFinalizer(ctx); err != nil {
		return ctrl.Result{}, err
	}
	suspended := l.steps.suspended(obj)
	l.metrics.RecordSuspend(ctx, obj, suspended)
	lastHandled := status.GetLastHandledReconcileRequest()
	// The request is acknowledged in the final status patch, not in the ones the pass writes
	// on the way (the intended inventory): a controller killed mid-pass handles it again.
	rep.acknowledge = true
	if suspended {
		ctrl.LoggerFrom(ctx).V(1).Info("suspended, nothing written")
		return ctrl.Result{}, nil
	}
	return l.steps.pass(ctx, obj, rep, lastHandled)
}
