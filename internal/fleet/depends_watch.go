package fleet

import (
	"context"
	"slices"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// The wakes of spec.dependsOn: a fleet is woken when what its gate or its teardown reads
// changes, found by fleetDependsOnIndex in the cache, never by listing every fleet:
//   - a member of a fleet it depends on is created, deleted, or changes what the gate reads
//     (memberGateChanged): the dependents of that member's fleet;
//   - a member of a fleet that depends on it is being deleted or goes: that fleet's
//     dependencies, whose teardown may wait for it;
//   - a fleet is created, deleted, starts its deletion, changes the revision its members must
//     be on, its selector or its spec.dependsOn: its dependents, and the fleets it names (before
//     and after the change), whose teardown may wait, or whose cycle may be made or broken.

// dependencyMember maps a change of a member Package to the fleets spec.dependsOn ties to its
// fleet. Only a member its fleet keeps wakes anyone (fleetWakes.wake checks it, as for the
// fleet's own wake).
func (w fleetWakes) dependencyMember(ctx context.Context, o client.Object) []ctrl.Request {
	name := o.GetLabels()[v1alpha1.FleetLabel]
	if name == "" || o.GetName() != name {
		return nil
	}
	// The fleets to wake first, from the cache and the index: most fleets have no dependents,
	// and then the member check (which may read a HostedControlPlane) is not paid.
	reqs := w.dependents(ctx, name)
	if !o.GetDeletionTimestamp().IsZero() {
		fleet := &v1alpha1.HostedClusterPackage{}
		if err := w.fleets.Get(ctx, client.ObjectKey{Name: name}, fleet); err == nil {
			reqs = append(reqs, requestsFor(fleet.Spec.DependsOn)...)
		}
	}
	if len(reqs) == 0 || len(w.member(ctx, o)) == 0 {
		return nil
	}
	return reqs
}

// dependents returns a request for every fleet whose spec.dependsOn names name.
func (w fleetWakes) dependents(ctx context.Context, name string) []ctrl.Request {
	list := &v1alpha1.HostedClusterPackageList{}
	if err := w.fleets.List(ctx, list, client.MatchingFields{fleetDependsOnIndex: name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the HostedClusterPackages that depend on a fleet", "fleet", name)
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for _, f := range list.Items {
		if f.Name != name {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKey{Name: f.Name}})
		}
	}
	return reqs
}

func requestsFor(deps []v1alpha1.FleetDependency) []ctrl.Request {
	reqs := make([]ctrl.Request, 0, len(deps))
	for _, d := range deps {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKey{Name: d.Name}})
	}
	return reqs
}

// dependencyFleets is the handler of HostedClusterPackage events for spec.dependsOn: it wakes
// the fleets tied to the one that changed (see above), not the fleet itself.
func (w fleetWakes) dependencyFleets() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []ctrl.Request) {
		for _, r := range reqs {
			q.Add(r)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, w.dependents(ctx, e.Object.GetName()))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, w.dependents(ctx, e.Object.GetName()))
			if f, ok := e.Object.(*v1alpha1.HostedClusterPackage); ok {
				add(q, requestsFor(f.Spec.DependsOn))
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldF, ok1 := e.ObjectOld.(*v1alpha1.HostedClusterPackage)
			newF, ok2 := e.ObjectNew.(*v1alpha1.HostedClusterPackage)
			if !ok1 || !ok2 || !fleetDependencyChanged(oldF, newF) {
				return
			}
			add(q, w.dependents(ctx, newF.Name))
			add(q, requestsFor(oldF.Spec.DependsOn))
			add(q, requestsFor(newF.Spec.DependsOn))
		},
	}
}

// fleetDependencyChanged tells whether an update of a fleet changes what the fleets tied to it
// by spec.dependsOn read of it: the start of its deletion, the revision its members must be on,
// its selector (a member's message says whether it selects the cluster), its spec.dependsOn.
func fleetDependencyChanged(oldF, newF *v1alpha1.HostedClusterPackage) bool {
	return oldF.DeletionTimestamp.IsZero() != newF.DeletionTimestamp.IsZero() ||
		dependencyRevision(oldF) != dependencyRevision(newF) ||
		!slices.Equal(oldF.Spec.DependsOn, newF.Spec.DependsOn) ||
		!equality.Semantic.DeepEqual(oldF.Spec.HostedClusterSelector, newF.Spec.HostedClusterSelector)
}

// memberGateChanged lets through the changes of a member Package that the gate of a dependent
// fleet or the teardown of a dependency reads: creation and deletion, a new generation, the
// start of its deletion, the observed generation, the Ready condition's status or reason, the
// revision annotation. Other status writes wake nobody: a dependent's reconcile lists its
// HostedClusters.
var memberGateChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldP, ok1 := e.ObjectOld.(*v1alpha1.Package)
		newP, ok2 := e.ObjectNew.(*v1alpha1.Package)
		if !ok1 || !ok2 {
			return false
		}
		oldR, newR := conditions.Get(oldP, meta.ReadyCondition), conditions.Get(newP, meta.ReadyCondition)
		readyChanged := (oldR == nil) != (newR == nil) || (oldR != nil && (oldR.Status != newR.Status || oldR.Reason != newR.Reason))
		return readyChanged || oldP.Generation != newP.Generation || oldP.Status.ObservedGeneration != newP.Status.ObservedGeneration ||
			oldP.DeletionTimestamp.IsZero() != newP.DeletionTimestamp.IsZero() ||
			oldP.Annotations[v1alpha1.FleetRevisionAnnotation] != newP.Annotations[v1alpha1.FleetRevisionAnnotation]
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}
