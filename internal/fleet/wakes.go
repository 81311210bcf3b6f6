package fleet

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// fleetWakes maps a change of a Package or a Secret labelled pkgsync.dev/fleet to the fleet it
// belongs to, when it does. The label alone is no proof: anyone who may write to a namespace
// can put it on their own objects, and every fleet pass reads the fleet's Secrets uncached and
// lists every HostedCluster (issue 41). An object wakes its fleet only when it is one the fleet
// keeps:
//   - carrying the fleet's UID (carriesFleetUID: the annotation pkgsync.dev/fleet-uid or an
//     ownerReference, which only the fleet's own writes carry: a tenant cannot read a
//     HostedClusterPackage to learn it, and a Package forged with it anyway is one the fleet
//     deletes as a stray member), or
//   - where the fleet derives it: in the hosted-control-plane namespace of a HostedCluster the
//     fleet selects, named as the fleet names it there. Enough to wake the fleet, whose pass
//     then decides by the UID (fleet_ownership.go), never to act on the object.
//
// Every check reads the manager's cache (the fleet by name, HostedClusters by the
// hosted-control-plane namespace index), so a tenant's object costs no API request and no list.
type fleetWakes struct {
	// fleets reads HostedClusterPackages.
	fleets client.Reader
	// hostedClusters reads HostedClusters, indexed by hosted.IndexHostedClusters.
	hostedClusters client.Reader
	// controlPlanes reads HostedControlPlanes, for the rare namespace several HostedClusters
	// map to (hosted.OwnerOfNamespace).
	controlPlanes client.Reader
	// hostedClusterAPI is false when the HostedCluster API is not installed: no namespace is
	// a member's then.
	hostedClusterAPI bool
}

// member maps a change of a Package to its fleet. A member is named like its fleet
// (desiredMember), so a Package of another name is never one, whatever its labels say.
func (w fleetWakes) member(ctx context.Context, o client.Object) []ctrl.Request {
	name := o.GetLabels()[v1alpha1.FleetLabel]
	if name == "" || o.GetName() != name {
		return nil
	}
	return w.wake(ctx, o, name, func(*v1alpha1.HostedClusterPackage) bool { return true })
}

// copy maps a change of a Secret to the fleet it is a copy of: one named like a Secret the
// fleet copies (fleetSecretNames).
func (w fleetWakes) copy(ctx context.Context, o client.Object) []ctrl.Request {
	name := o.GetLabels()[v1alpha1.FleetLabel]
	if name == "" {
		return nil
	}
	return w.wake(ctx, o, name, func(fleet *v1alpha1.HostedClusterPackage) bool {
		_, copied := fleetSecretNames(fleet)[o.GetName()]
		return copied
	})
}

// wake returns the request for fleet name when o carries its UID or, named as the fleet names
// it (named), sits in the namespace of one of its members.
func (w fleetWakes) wake(ctx context.Context, o client.Object, name string, named func(*v1alpha1.HostedClusterPackage) bool) []ctrl.Request {
	req := []ctrl.Request{{NamespacedName: client.ObjectKey{Name: name}}}
	fleet := &v1alpha1.HostedClusterPackage{}
	if err := w.fleets.Get(ctx, client.ObjectKey{Name: name}, fleet); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // no fleet to wake
		}
		// The cache failed: wake rather than lose a member's change; a request for a fleet
		// that does not exist costs one cache read.
		return req
	}
	// The UID first: a copy of a Secret the fleet no longer names is still its own, and a
	// member whose cluster is gone is still being torn down.
	if carriesFleetUID(o, fleet) || (named(fleet) && w.inMemberNamespace(ctx, fleet, o.GetNamespace())) {
		return req
	}
	return nil
}

// inMemberNamespace tells whether namespace is the hosted-control-plane namespace of a
// HostedCluster the fleet selects, as members() derives them.
func (w fleetWakes) inMemberNamespace(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, namespace string) bool {
	if !w.hostedClusterAPI {
		return false
	}
	hc, err := hosted.FindHostedCluster(ctx, w.hostedClusters, w.controlPlanes, namespace, true)
	switch {
	case err != nil:
		// Several HostedClusters map to namespace and none is told apart, or the cache
		// failed: it is a hosted-control-plane namespace either way, which only the operator
		// makes; the pass reports what is wrong with it.
		return true
	case hc == nil:
		return false
	case fleet.Spec.HostedClusterSelector == nil:
		return true
	}
	selector, err := metav1.LabelSelectorAsSelector(fleet.Spec.HostedClusterSelector)
	if err != nil {
		return false // the fleet is stalled on its spec; only a spec change wakes it usefully
	}
	return selector.Matches(labels.Set(hc.Labels))
}
