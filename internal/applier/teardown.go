package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// TeardownInventory is the finalize step (reconciler.Steps.Finalize) of the kinds that apply objects:
// one teardown pass over what their inventory holds.
func TeardownInventory[T reconciler.Object](ro *Applier, reader client.Reader, opts reconciler.Options, kind string,
	status func(T) *v1alpha1.ApplyStatus, serviceAccount func(T) string) func(context.Context, T) (ctrl.Result, error) {
	return func(ctx context.Context, obj T) (ctrl.Result, error) {
		return finalize(ctx, ro, reader, obj, OwnerOf(obj, kind), serviceAccount(obj), status(obj), opts)
	}
}

// finalize makes one teardown pass for a resource being deleted and lets the resource go once
// everything is gone. Hosted objects are removed first when the hosted cluster answers; when
// the namespace is terminating (HyperShift is deleting the hosted control plane) or the hosted
// cluster has not answered for HostedTeardownTimeout, they are let go so that deletion never
// hangs. A pass that fails returns its error, which the lifecycle reports and retries as every
// failure of a step (lifecycle.failed); only an unreachable hosted cluster has a wake of its own.
func finalize(ctx context.Context, r *Applier, reader client.Reader, obj reconciler.Object, owner apply.Owner,
	serviceAccount string, status *v1alpha1.ApplyStatus, opts reconciler.Options) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerName) {
		return ctrl.Result{}, nil
	}
	r.progress.done(obj.GetUID())
	waiting, err := teardownPass(ctx, r, reader, obj, owner, serviceAccount, status, opts)
	// The controller's intervals, which the teardown has always used, whatever the resource's.
	iv := reconciler.Intervals{Retry: opts.RetryInterval, Progress: opts.ProgressInterval}
	var down *hosted.UnavailableError
	switch {
	case errors.As(err, &down):
		o := reconciler.Failure(err)
		o.Wake = hostedTeardownWait(down.NextProbe, obj.GetDeletionTimestamp().Time, time.Now(), opts)
		return reconciler.Settle(obj, o, iv), nil
	case err != nil:
		return ctrl.Result{}, err
	case waiting != nil:
		return reconciler.Settle(obj, *waiting, iv), nil
	}
	controllerutil.RemoveFinalizer(obj, v1alpha1.FinalizerName)
	r.forgetHostedIfUnused(ctx, owner.Namespace, obj)
	return ctrl.Result{}, nil
}

// hostedTeardownWait says when a teardown held by an unreachable hosted cluster is tried again:
// nothing is sent to the hosted cluster before its next probe (a probe that succeeds wakes the
// resource at once), and no later than when the teardown timeout, counted from deleted, lets
// its objects go.
func hostedTeardownWait(nextProbe, deleted, now time.Time, opts reconciler.Options) time.Duration {
	wait := max(nextProbe.Sub(now)+time.Second, opts.RetryInterval)
	if letGo := deleted.Add(opts.HostedTeardownTimeout).Sub(now); letGo > 0 {
		wait = min(wait, letGo+time.Second)
	}
	return wait
}

// forgetHostedIfUnused drops the hosted client of a namespace, and its circuit, once the last
// resource there that could use it is gone: a dead hosted cluster whose resources were all
// deleted is probed no more. When the list fails the client stays; the idle timeout ends it.
func (r *Applier) forgetHostedIfUnused(ctx context.Context, namespace string, deleted client.Object) {
	if r.Targets.hosted == nil || namespace == "" {
		return
	}
	for _, list := range []client.ObjectList{&v1alpha1.PackageList{}, &v1alpha1.ObjectDeploymentList{}} {
		if err := r.Reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
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
	r.Targets.hosted.Forget(namespace)
}

// teardownPass deletes what the inventory holds, a phase at a time. It returns the outcome of a
// pass that waits for objects to go, nil once all is gone, and an error (saying that it
// happened while deleting) when the pass failed.
func teardownPass(ctx context.Context, r *Applier, reader client.Reader, obj reconciler.Object, owner apply.Owner,
	serviceAccount string, status *v1alpha1.ApplyStatus, opts reconciler.Options) (*reconciler.Outcome, error) {
	if status.Inventory == nil || len(status.Inventory.Phases) == 0 {
		return nil, nil
	}
	policy := teardownPolicy{letGoUnreachableHosted: time.Since(obj.GetDeletionTimestamp().Time) > opts.HostedTeardownTimeout}
	if owner.Namespace != "" {
		terminating, created, err := namespaceTerminating(ctx, reader, owner.Namespace)
		if err != nil {
			return nil, fmt.Errorf("deleting: %w", err)
		}
		policy.namespaceTerminating, policy.namespaceCreated = terminating, created
		policy.letGoUnreachableHosted = policy.letGoUnreachableHosted || terminating
	}
	res, letGo, err := r.teardown(ctx, owner, serviceAccount, status.Inventory, policy)
	if len(letGo) > 0 {
		ctrl.LoggerFrom(ctx).Info("let objects go without deleting them", "objects", refList(letGo), "namespaceTerminating", policy.namespaceTerminating)
	}
	if len(letGo) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, v1alpha1.ObjectsLeftReason,
			"let %d object(s) go without deleting them (the cluster cannot be reached, the namespace is being deleted, or it is not a hosted-control-plane namespace): %s",
			len(letGo), refList(letGo))
	}
	if res != nil {
		status.Inventory = inventoryToStatus(res.Inventory)
	}
	if err != nil {
		return nil, fmt.Errorf("deleting: %w", err)
	}
	if !res.Done() {
		status.Phase = "Deleting " + res.Phase
		return &reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.DeletingReason,
			Message: fmt.Sprintf("deleting phase %s: waiting for %d object(s) to go: %s", res.Phase, len(res.Remaining), refList(res.Remaining))}, nil
	}
	return nil, nil
}

// namespaceTerminating reports whether a namespace is being deleted (or is gone), and when it
// was created (zero when it is gone).
func namespaceTerminating(ctx context.Context, reader client.Reader, name string) (bool, time.Time, error) {
	var ns corev1.Namespace
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return true, time.Time{}, nil
		}
		return false, time.Time{}, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return !ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating, ns.CreationTimestamp.Time, nil
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

// teardownPolicy says what a teardown pass may let go instead of deleting.
type teardownPolicy struct {
	// letGoUnreachableHosted lets hosted objects go when the hosted cluster cannot be reached:
	// its namespace is going away, or the wait ran out.
	letGoUnreachableHosted bool
	// namespaceTerminating lets management objects in the owner's terminating namespace go when
	// they cannot be deleted (the impersonated ServiceAccount's RoleBinding may be gone already):
	// the namespace deletion removes them anyway.
	namespaceTerminating bool
	// namespaceCreated is when the owner's namespace was created (zero when unknown): the
	// departed hosted client of a namespace of the same name deleted before is not its own.
	namespaceCreated time.Time
}

// teardown makes one teardown pass and returns, besides its result, the objects it let go
// instead of deleting, so that HyperShift's and Kubernetes' namespace deletion is never blocked.
// Hosted objects of a namespace that is not (or no longer) a hosted-control-plane namespace are
// always let go: the connector Secret of such a namespace is never used.
func (r *Applier) teardown(ctx context.Context, owner apply.Owner, serviceAccount string, inv *v1alpha1.Inventory, policy teardownPolicy) (*apply.TeardownResult, []apply.ObjectRef, error) {
	current, err := inventoryFromStatus(inv)
	if err != nil {
		return nil, nil, err
	}
	isHosted := func(class string, _ apply.ObjectRef) bool { return class == classHosted }
	var letGo []apply.ObjectRef
	classes := map[string]bool{}
	for _, ph := range current.Phases {
		classes[ph.Class] = true
	}
	var behind HostedBehind
	if classes[classHosted] && owner.Namespace != "" {
		if behind, err = r.FindHostedCluster(ctx, owner.Namespace); err != nil {
			return nil, nil, err
		}
		if r.admitHosted(ctx, owner.Namespace, behind) != nil {
			current, letGo = splitInventory(current, isHosted, letGo)
			delete(classes, classHosted)
		}
	}
	tgts, hostedErr := r.Targets.forPass(ctx, owner.Namespace, behind.Cluster, r.serviceAccountNamespace(owner), r.serviceAccountFor(owner, serviceAccount), classes)
	if hostedErr == nil && classes[classHosted] {
		// A teardown pass is followed by another within seconds, or by Forget.
		defer r.Targets.hosted.Release(owner.Namespace, tgts[classHosted], 0)
	}
	if hostedErr != nil && tgts != nil && policy.namespaceTerminating && hosted.IsNoCredentials(hostedErr) && r.Targets.hosted != nil {
		// The namespace controller deleted the connector Secret with everything else while this
		// resource waited on its finalizer: the client it last used, while its API server still
		// answered, removes the hosted objects; if it does not answer now they are let go below.
		// Only as Target would have served it (the HostedCluster's endpoint), and only in the
		// namespace its Secret was in, not in one of the same name created since.
		if ht, ok := r.Targets.hosted.Departed(owner.Namespace, policy.namespaceCreated, behind.Cluster); ok {
			tgts[classHosted], hostedErr = ht, nil
		}
	}
	if hostedErr != nil {
		if tgts == nil || !policy.letGoUnreachableHosted {
			return nil, letGo, hostedErr
		}
		current, letGo = splitInventory(current, isHosted, letGo)
	}
	res, err := r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
	var unavailable *apply.TargetUnavailableError
	if err != nil && hostedErr == nil && errors.As(err, &unavailable) && unavailable.Class == classHosted {
		// Teardown uses the circuit as apply passes do: the next passes, and the other resources
		// of the namespace, send nothing until a probe gets an answer.
		err = r.openCircuit(ctx, owner.Namespace, err, unavailable)
		if policy.letGoUnreachableHosted {
			// The hosted API server went away during the pass: let its objects go.
			current, letGo = splitInventory(current, isHosted, letGo)
			res, err = r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
		}
	}
	if err != nil && policy.namespaceTerminating && owner.Namespace != "" {
		inNamespace := func(class string, ref apply.ObjectRef) bool { return class == "" && ref.Namespace == owner.Namespace }
		current, letGo = splitInventory(current, inNamespace, letGo)
		res, err = r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
		if apierrors.IsForbidden(err) {
			// Objects outside the namespace (placed with --allow-cross-namespace) that the
			// resource's identity may no longer delete: the namespace must not wait for them.
			onManagement := func(class string, _ apply.ObjectRef) bool { return class == "" }
			current, letGo = splitInventory(current, onManagement, letGo)
			res, err = r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
		}
	}
	return res, letGo, err
}

// splitInventory removes the objects match selects from inv and appends them to out.
func splitInventory(inv apply.Inventory, match func(class string, ref apply.ObjectRef) bool, out []apply.ObjectRef) (apply.Inventory, []apply.ObjectRef) {
	var kept apply.Inventory
	for _, ph := range inv.Phases {
		keep := apply.InventoryPhase{Name: ph.Name, Class: ph.Class}
		for _, ref := range ph.Objects {
			if match(ph.Class, ref) {
				out = append(out, ref)
			} else {
				keep.Objects = append(keep.Objects, ref)
			}
		}
		if len(keep.Objects) > 0 {
			kept.Phases = append(kept.Phases, keep)
		}
	}
	return kept, out
}
