package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// teardownInventory is the finalize step (kindSteps.finalize) of the kinds that apply objects:
// one teardown pass over what their inventory holds.
func teardownInventory[T statusObject](ro *rollouts, reader client.Reader, opts Options, kind string,
	status func(T) *v1alpha1.RolloutStatus, serviceAccount func(T) string) func(context.Context, T) (ctrl.Result, error) {
	return func(ctx context.Context, obj T) (ctrl.Result, error) {
		return finalize(ctx, ro, reader, obj, ownerOf(obj, kind), serviceAccount(obj), status(obj), opts)
	}
}

// finalize makes one teardown pass for a resource being deleted and lets the resource go once
// everything is gone. Hosted objects are removed first when the hosted cluster answers; when
// the namespace is terminating (HyperShift is deleting the hosted control plane) or the hosted
// cluster has not answered for HostedTeardownTimeout, they are let go so that deletion never
// hangs.
func finalize(ctx context.Context, r *rollouts, reader client.Reader, obj statusObject, owner apply.Owner,
	serviceAccount string, status *v1alpha1.RolloutStatus, opts Options) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerName) {
		return ctrl.Result{}, nil
	}
	done, err := teardownPass(ctx, r, reader, obj, owner, serviceAccount, status, opts)
	var down *hosted.UnavailableError
	if errors.As(err, &down) {
		return ctrl.Result{RequeueAfter: hostedTeardownWait(down.NextProbe, obj.GetDeletionTimestamp().Time, time.Now(), opts)}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !done {
		return ctrl.Result{RequeueAfter: opts.ProgressInterval}, nil
	}
	controllerutil.RemoveFinalizer(obj, v1alpha1.FinalizerName)
	r.forgetHostedIfUnused(ctx, owner.Namespace, obj)
	return ctrl.Result{}, nil
}

// hostedTeardownWait says when a teardown held by an unreachable hosted cluster is tried again:
// nothing is sent to the hosted cluster before its next probe (a probe that succeeds wakes the
// resource at once), and no later than when the teardown timeout, counted from deleted, lets
// its objects go.
func hostedTeardownWait(nextProbe, deleted, now time.Time, opts Options) time.Duration {
	wait := max(nextProbe.Sub(now)+time.Second, opts.RetryInterval)
	if letGo := deleted.Add(opts.HostedTeardownTimeout).Sub(now); letGo > 0 {
		wait = min(wait, letGo+time.Second)
	}
	return wait
}

// forgetHostedIfUnused drops the hosted client of a namespace, and its circuit, once the last
// resource there that could use it is gone: a dead hosted cluster whose resources were all
// deleted is probed no more. When the list fails the client stays; the idle timeout ends it.
func (r *rollouts) forgetHostedIfUnused(ctx context.Context, namespace string, deleted client.Object) {
	if r.targets.hosted == nil || namespace == "" {
		return
	}
	for _, list := range []client.ObjectList{&v1alpha1.PackageList{}, &v1alpha1.ObjectDeploymentList{}} {
		if err := r.reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return
		}
		for _, item := range items {
			if o, ok := item.(client.Object); !ok || o.GetUID() != deleted.GetUID() {
				return
			}
		}
	}
	r.targets.hosted.Forget(namespace)
}

// teardownPass deletes what the inventory holds, a phase at a time, and reports whether all is gone.
func teardownPass(ctx context.Context, r *rollouts, reader client.Reader, obj statusObject, owner apply.Owner,
	serviceAccount string, status *v1alpha1.RolloutStatus, opts Options) (bool, error) {
	if status.Inventory == nil || len(status.Inventory.Phases) == 0 {
		return true, nil
	}
	policy := teardownPolicy{letGoUnreachableHosted: time.Since(obj.GetDeletionTimestamp().Time) > opts.HostedTeardownTimeout}
	if owner.Namespace != "" {
		terminating, err := namespaceTerminating(ctx, reader, owner.Namespace)
		if err != nil {
			return false, err
		}
		policy.namespaceTerminating = terminating
		policy.letGoUnreachableHosted = policy.letGoUnreachableHosted || terminating
	}
	res, letGo, err := r.teardown(ctx, owner, serviceAccount, status.Inventory, policy)
	if len(letGo) > 0 {
		ctrl.LoggerFrom(ctx).Info("let objects go without deleting them", "objects", refList(letGo), "namespaceTerminating", policy.namespaceTerminating)
	}
	if len(letGo) > 0 && r.recorder != nil {
		r.recorder.Eventf(obj, corev1.EventTypeWarning, v1alpha1.ObjectsLeftReason,
			"let %d object(s) go without deleting them (the cluster cannot be reached, the namespace is being deleted, or it is not a hosted-control-plane namespace): %s",
			len(letGo), refList(letGo))
	}
	if res != nil {
		status.Inventory = inventoryToStatus(res.Inventory)
	}
	if err != nil {
		conditions.MarkFalse(obj, meta.ReadyCondition, reasonFor(err), "deleting: %s", err.Error())
		return false, err
	}
	if !res.Done() {
		status.Phase = "Deleting " + res.Phase
		msg := fmt.Sprintf("deleting phase %s: waiting for %d object(s) to go: %s", res.Phase, len(res.Remaining), refList(res.Remaining))
		conditions.MarkFalse(obj, meta.ReadyCondition, v1alpha1.DeletingReason, "%s", msg)
		conditions.MarkReconciling(obj, v1alpha1.DeletingReason, "%s", msg)
		return false, nil
	}
	return true, nil
}

func namespaceTerminating(ctx context.Context, reader client.Reader, name string) (bool, error) {
	var ns corev1.Namespace
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return !ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating, nil
}

// refList names at most five objects.
func refList(refs []apply.ObjectRef) string {
	var names []string
	for i, r := range refs {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(refs)-i))
			break
		}
		names = append(names, r.String())
	}
	return strings.Join(names, ", ")
}
