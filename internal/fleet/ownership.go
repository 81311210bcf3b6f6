package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// A member Package or a copied Secret is the fleet's when it carries the fleet's label and the
// fleet's UID. The UID is the proof: only the fleet's own writes put it there (a tenant cannot
// read a HostedClusterPackage, cluster-scoped, to learn it), whereas anyone who may write to a
// namespace can give their own objects the label, the fleet's name and a member's namespace.
// The fleet writes its UID twice: in the annotation pkgsync.dev/fleet-uid, always, and, with
// deletionPolicy Delete, in an ownerReference, for the garbage collector to delete what is left
// should the fleet go without pkgsync's finalizer (removed by hand, pkgsync uninstalled).
//
// The annotation is what deletion goes by. kubectl delete --cascade=orphan has the garbage
// collector take every ownerReference to the fleet off before pkgsync's finalizer runs (or
// while it does), and --cascade=foreground has it delete every object with one. So with
// deletionPolicy Orphan the fleet sets no ownerReference at all: no cascade can delete a
// member, and the collector has nothing to write, so the release never races it. With Delete,
// whatever the collector stripped is still found by the annotation, and whatever it deleted
// was to be deleted anyway.
//
// The name rule of fleetWakes (named like the fleet in the hosted-control-plane namespace of a
// HostedCluster it selects) is not proof enough to delete or release anything: a Package or a
// Secret someone else labelled there (one the fleet reports as a Collision) would pass it, and
// a member whose cluster left the selection, still being torn down, would not. It only wakes
// the fleet.

// carriesFleetUID reports whether o carries the fleet's UID, in the annotation or an
// ownerReference (objects an older pkgsync wrote have only the latter).
func carriesFleetUID(o metav1.Object, fleet *v1alpha1.HostedClusterPackage) bool {
	if fleet.UID == "" {
		return false
	}
	if o.GetAnnotations()[v1alpha1.FleetUIDAnnotation] == string(fleet.UID) {
		return true
	}
	return slices.ContainsFunc(o.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == fleet.UID })
}

// IsFleetMember reports whether p is a member of fleet: named like it (desiredMember),
// labelled with its name and carrying its UID.
func IsFleetMember(p metav1.Object, fleet *v1alpha1.HostedClusterPackage) bool {
	return p.GetName() == fleet.Name && p.GetLabels()[v1alpha1.FleetLabel] == fleet.Name && carriesFleetUID(p, fleet)
}

// isFleetCopy reports whether s is one of the fleet's Secret copies: labelled with its name and
// carrying its UID, under any name (a copy of a Secret the fleet no longer names is its own
// until the fleet deletes it).
func isFleetCopy(s metav1.Object, fleet *v1alpha1.HostedClusterPackage) bool {
	return s.GetLabels()[v1alpha1.FleetLabel] == fleet.Name && carriesFleetUID(s, fleet)
}

// fleetOwners returns refs with the fleet's ownerReference as its deletionPolicy has it: one,
// the controller, with Delete; none with Orphan. Other owners are kept.
func fleetOwners(refs []metav1.OwnerReference, fleet *v1alpha1.HostedClusterPackage) []metav1.OwnerReference {
	out := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool { return ref.UID == fleet.UID })
	if fleet.Spec.GetDeletionPolicy() == v1alpha1.FleetDeletionDelete {
		out = append(out, fleetOwnerReference(fleet))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// fleetOwnersUpToDate reports whether refs hold the fleet's ownerReference as fleetOwners
// would have them.
func fleetOwnersUpToDate(refs []metav1.OwnerReference, fleet *v1alpha1.HostedClusterPackage) bool {
	var found []metav1.OwnerReference
	for _, ref := range refs {
		if ref.UID == fleet.UID {
			found = append(found, ref)
		}
	}
	if fleet.Spec.GetDeletionPolicy() != v1alpha1.FleetDeletionDelete {
		return len(found) == 0
	}
	return len(found) == 1 && ptr.Deref(found[0].Controller, false)
}

// keepOwnership gives a member the plan leaves as it is (held, blocked, on an earlier target)
// the fleet's UID and the ownerReference its deletionPolicy has (fleetOwners), and nothing
// else: they decide what deleting the fleet does to the member, which neither a hold nor the
// rollout holds back (a member held with an ownerReference after the policy became Orphan
// would be deleted by kubectl delete --cascade=foreground). A member that has them costs no
// request; the write is guarded by the member's resourceVersion (the ownerReferences are a
// list, replaced whole), and one that conflicts is retried on the next pass.
func keepOwnership(ctx context.Context, c client.Client, m *rollout.Member, fleet *v1alpha1.HostedClusterPackage) error {
	p := m.Pkg
	if p == nil || m.Pending || p.UID == "" || !p.DeletionTimestamp.IsZero() ||
		(p.Annotations[v1alpha1.FleetUIDAnnotation] == string(fleet.UID) && fleetOwnersUpToDate(p.OwnerReferences, fleet)) {
		return nil
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	written := p.DeepCopy()
	if written.Annotations == nil {
		written.Annotations = map[string]string{}
	}
	written.Annotations[v1alpha1.FleetUIDAnnotation] = string(fleet.UID)
	written.OwnerReferences = fleetOwners(written.OwnerReferences, fleet)
	if err := c.Patch(ctx, written, patch, client.FieldOwner(fleetFieldOwner)); err != nil {
		return fmt.Errorf("write the ownership of member %s/%s (spec.deletionPolicy=%s): %w", p.Namespace, p.Name, fleet.Spec.GetDeletionPolicy(), err)
	}
	return nil
}

// maxFleetWriteAttempts bounds the writes of one object in one pass that conflict with
// another writer's (the garbage collector, the member's own controller): each attempt reads the
// object afresh, and the last conflict is returned, for the pass to be retried.
const maxFleetWriteAttempts = 4

// releaseFromFleet takes off obj (a member Package or a copied Secret) everything that ties
// it to the fleet, in one write, so that no pass leaves an object half released (unlabelled
// but still owned, which the garbage collector would delete once the fleet is gone): the label
// pkgsync.dev/fleet, the annotations pkgsync.dev/fleet-uid, -revision and -revision-time, and an
// ownerReference to the fleet. Keys are removed by name, so what others changed meanwhile is
// kept and needs no lock; only an ownerReference, which goes in a list replaced whole, makes
// the write guarded by obj's resourceVersion, and a conflict is retried on a fresh read (from
// fresh). An object that is gone needs no release.
func releaseFromFleet(ctx context.Context, c client.Client, fresh client.Reader, obj client.Object, fleet *v1alpha1.HostedClusterPackage) error {
	current := obj
	for attempt := 1; ; attempt++ {
		err := patchRelease(ctx, c, current, fleet)
		if !apierrors.IsConflict(err) || attempt == maxFleetWriteAttempts {
			return client.IgnoreNotFound(err)
		}
		current = obj.DeepCopyObject().(client.Object)
		if err := fresh.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
}

// patchRelease sends the release of obj as it was read; nothing when nothing of the fleet is
// on it.
func patchRelease(ctx context.Context, c client.Client, obj client.Object, fleet *v1alpha1.HostedClusterPackage) error {
	meta := map[string]any{}
	if _, ok := obj.GetLabels()[v1alpha1.FleetLabel]; ok {
		meta["labels"] = map[string]any{v1alpha1.FleetLabel: nil}
	}
	annotations := map[string]any{}
	for _, k := range []string{v1alpha1.FleetUIDAnnotation, v1alpha1.FleetRevisionAnnotation, v1alpha1.FleetRevisionTimeAnnotation} {
		if _, ok := obj.GetAnnotations()[k]; ok {
			annotations[k] = nil
		}
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	refs := obj.GetOwnerReferences()
	if kept := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool { return ref.UID == fleet.UID }); len(kept) != len(refs) {
		meta["ownerReferences"] = kept
		meta["resourceVersion"] = obj.GetResourceVersion()
	}
	if len(meta) == 0 {
		return nil
	}
	if uid := obj.GetUID(); uid != "" {
		// The object read is the one written: one deleted and created again under the same
		// name meanwhile is not the fleet's (the API server refuses a change of uid).
		meta["uid"] = uid
	}
	data, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return fmt.Errorf("encode the release: %w", err)
	}
	return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data), client.FieldOwner(fleetFieldOwner))
}

// removeFleetFinalizer takes pkgsync's finalizer off the fleet, on the API server, once its
// deletion is done. It departs from the lifecycle, whose patch of the metadata carries the
// finalizers as read when the reconcile began: the garbage collector takes its own finalizer
// (orphan, foregroundDeletion) off the same list at the same time, and a list read before
// that write would put it back, which the API server refuses for an object being deleted (the
// reconcile failed and was retried). Here the list is read afresh and written guarded by its
// resourceVersion, and a conflict is retried on a fresh read. The fleet given is left as it
// was read, so that the lifecycle's patch sends no finalizers.
func removeFleetFinalizer(ctx context.Context, c client.Client, fresh client.Reader, fleet *v1alpha1.HostedClusterPackage) error {
	for attempt := 1; ; attempt++ {
		current := &v1alpha1.HostedClusterPackage{}
		if err := fresh.Get(ctx, client.ObjectKeyFromObject(fleet), current); err != nil {
			return client.IgnoreNotFound(err)
		}
		if current.UID != fleet.UID || !controllerutil.ContainsFinalizer(current, v1alpha1.FinalizerName) {
			return nil
		}
		patch := client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(current, v1alpha1.FinalizerName)
		err := c.Patch(ctx, current, patch, client.FieldOwner(reconciler.FieldOwner))
		if !apierrors.IsConflict(err) || attempt == maxFleetWriteAttempts {
			if err = client.IgnoreNotFound(err); err != nil {
				return fmt.Errorf("remove the finalizer: %w", err)
			}
			return nil
		}
	}
}
