package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// finalize carries out spec.deletionPolicy, whatever kubectl delete's --cascade was (see
// fleet_ownership.go: members and copies are found by the fleet's UID, which no garbage
// collector takes off). Delete deletes every member, then the copied Secrets once the members
// are gone (each member's own finalizer tears its objects down first; member deletions wake
// the fleet), and removes the finalizer. Orphan releases the members and their copies
// (orphan) instead. The members are waited for in the cache; what is deleted or released last
// and the finalizer are decided on fresh reads, so that nothing written moments before the
// deletion, which the cache may not show yet, is left with the fleet's label. An error is a
// failure the lifecycle reports and retries (lifecycle.failed), as a failed pass is.
func (r *fleetSteps) finalize(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fleet, v1alpha1.FinalizerName) {
		// Deleted before its first reconcile wrote the finalizer, so before any member, or
		// done and held by the garbage collector's finalizer: nothing is the fleet's to do.
		return ctrl.Result{}, nil
	}
	if fleet.Spec.GetDeletionPolicy() == v1alpha1.FleetDeletionOrphan {
		return r.orphan(ctx, fleet)
	}
	owned, err := r.ownedMembers(ctx, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(owned) == 0 {
		if owned, err = r.listMembers(ctx, r.apiReader, fleet); err != nil {
			return ctrl.Result{}, err
		}
	}
	waits, err := r.deleteMembers(ctx, fleet, owned)
	if err != nil {
		return ctrl.Result{}, err
	}
	if left := len(owned); left > 0 {
		// Each member's deletion wakes the fleet, and so does that of a dependent's member a
		// member waits for; the progress interval bounds a wake missed.
		msg := fmt.Sprintf("waiting for %d member(s) to be torn down", left)
		if len(waits) > 0 {
			msg += fmt.Sprintf("; %d not deleted yet: %s", len(waits), describeWaits(waits))
		}
		return reconciler.Settle(fleet, reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.DeletingReason,
			Message: msg}, r.intervals(fleet)), nil
	}
	if r.secrets != nil {
		if err := r.secrets.deleteAll(ctx, fleet); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.finished(ctx, fleet)
}

// deleteMembers deletes the fleet's members (owned) that are not being deleted yet, except those
// that wait for the members of fleets that depend on this one (dependentMembers), which it
// returns, one line each. They wait reconciler.MaxDependentTeardownWait after the fleet's
// deletion at most, as a Package waits for its dependents: whoever owns a dependent fleet (or
// a member whose teardown hangs) does not hold this fleet's teardown for longer; a member
// deleted at the deadline under a dependent's is told of in a Warning event.
func (r *fleetSteps) deleteMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, owned []*v1alpha1.Package) ([]string, error) {
	if len(owned) == 0 {
		return nil, nil
	}
	dependents, err := r.dependentMembers(ctx, fleet)
	if err != nil {
		return nil, err
	}
	deadline := fleet.GetDeletionTimestamp().Add(reconciler.MaxDependentTeardownWait)
	var waits []string
	for _, p := range owned {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if names := dependents[p.Namespace]; len(names) > 0 {
			if time.Now().Before(deadline) {
				waits = append(waits, teardownWait(p.Namespace, names)+fmt.Sprintf(", until %s at most", deadline.UTC().Format(time.RFC3339)))
				continue
			}
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, v1alpha1.DeletingReason, "deleting the member in %s although %s still keep(s) a member there: waited %s after the fleet's deletion",
				p.Namespace, strings.Join(names, ", "), reconciler.MaxDependentTeardownWait)
		}
		if err := r.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete member %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return waits, nil
}

// orphan releases the fleet's members (deletionPolicy Orphan): each keeps its spec, pinned to
// the digest of its revision, and reconciles on its own; nothing ties it to the fleet any more
// (releaseFromFleet). Members already being deleted (their HostedCluster left the fleet) are
// waited for first, as Delete does. The copied Secrets in the namespaces of the members
// released stay, released too, for them to go on pulling and verifying with; copies elsewhere
// are deleted. Copies go first: a pass that fails half way through the members finds them
// released already, and never takes a released member's copy for a stray one. Everything is
// read afresh: the release is one pass, and it must not miss what the cache does not show yet.
func (r *fleetSteps) orphan(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) (ctrl.Result, error) {
	owned, err := r.listMembers(ctx, r.apiReader, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}
	live := map[string]bool{}
	deleting := 0
	for _, p := range owned {
		if p.DeletionTimestamp.IsZero() {
			live[p.Namespace] = true
		} else {
			deleting++
		}
	}
	if deleting > 0 {
		return reconciler.Settle(fleet, reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.DeletingReason,
			Message: fmt.Sprintf("waiting for %d member(s) of clusters that left the fleet to be torn down; then the others are released (spec.deletionPolicy=Orphan)", deleting)},
			r.intervals(fleet)), nil
	}
	if r.secrets != nil {
		if err := r.secrets.release(ctx, fleet, live); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, p := range owned {
		if err := releaseFromFleet(ctx, r.client, r.apiReader, p, fleet); err != nil {
			return ctrl.Result{}, fmt.Errorf("release member %s/%s: %w", p.Namespace, p.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("released member: it reconciles on its own (spec.deletionPolicy=Orphan)", "namespace", p.Namespace)
	}
	return r.finished(ctx, fleet)
}

// finished forgets what is kept for a fleet whose deletion is done, and removes its finalizer
// (removeFleetFinalizer).
func (r *fleetSteps) finished(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) (ctrl.Result, error) {
	if err := removeFleetFinalizer(ctx, r.client, r.apiReader, fleet); err != nil {
		return ctrl.Result{}, err
	}
	r.writes.forget(fleet.Name)
	r.preflights.forget(fleet.Name)
	r.own.FleetMembers.DeletePartialMatch(map[string]string{"fleet": fleet.Name})
	return ctrl.Result{}, nil
}
