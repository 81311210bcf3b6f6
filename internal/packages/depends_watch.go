package packages

import (
	"context"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/setup"
)

// indexDependencies registers dependsOnIndex on Packages and ClusterPackages.
func indexDependencies(ctx context.Context, s *setup.Services) error {
	idx := s.Manager.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.Package{}, dependsOnIndex, indexDependsOn(v1alpha1.PackageKind)); err != nil {
		return err
	}
	return idx.IndexField(ctx, &v1alpha1.ClusterPackage{}, dependsOnIndex, indexDependsOn(v1alpha1.ClusterPackageKind))
}

// watchDependencies wakes the resources of one kind (ownKind) when an installation they depend
// on changes what readiness reads (dependencyChanged): its dependents, found by dependsOnIndex,
// are reconciled at once, not at their next interval. It also wakes, when an installation being
// deleted changes or goes, the installations of ownKind it depends on that are being deleted
// too, whose teardown waits for it (dependentsFirst); one not being deleted waits for nothing.
//
// A Package may depend on Packages of its namespace and on ClusterPackages; a ClusterPackage on
// ClusterPackages; so Packages watch both kinds, ClusterPackages watch ClusterPackages for
// readiness and both kinds for teardown.
func watchDependencies(b *builder.Builder, c client.Client, ownKind string) *builder.Builder {
	changed := builder.WithPredicates(dependencyChanged{})
	if ownKind == v1alpha1.PackageKind {
		b = b.Watches(&v1alpha1.Package{}, handler.EnqueueRequestsFromMapFunc(wakeDependencyUsers(c, ownKind, v1alpha1.PackageKind)), changed)
		return b.Watches(&v1alpha1.ClusterPackage{}, handler.EnqueueRequestsFromMapFunc(wakeDependencyUsers(c, ownKind, v1alpha1.ClusterPackageKind)), changed)
	}
	b = b.Watches(&v1alpha1.ClusterPackage{}, handler.EnqueueRequestsFromMapFunc(wakeDependencyUsers(c, ownKind, v1alpha1.ClusterPackageKind)), changed)
	return b.Watches(&v1alpha1.Package{}, handler.EnqueueRequestsFromMapFunc(wakeDependencyUsers(c, ownKind, v1alpha1.PackageKind)), changed)
}

// wakeDependencyUsers maps a change of an installation o of kind to the resources of ownKind it
// concerns: those that depend on it (by the index), and, while o is being deleted, those o
// depends on.
func wakeDependencyUsers(c client.Client, ownKind, kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		p, ok := o.(packageObject)
		if !ok {
			return nil
		}
		match := client.MatchingFields{dependsOnIndex: dependencyID(kind, o.GetNamespace(), o.GetName())}
		if ownKind == v1alpha1.PackageKind {
			list := &v1alpha1.PackageList{}
			var opts []client.ListOption
			if o.GetNamespace() != "" {
				opts = append(opts, client.InNamespace(o.GetNamespace()))
			}
			if err := c.List(ctx, list, append(opts, match)...); err == nil {
				for i := range list.Items {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
			}
		} else if kind == v1alpha1.ClusterPackageKind {
			list := &v1alpha1.ClusterPackageList{}
			if err := c.List(ctx, list, match); err == nil {
				for i := range list.Items {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
			}
		}
		if !o.GetDeletionTimestamp().IsZero() {
			refs, err := dependenciesOf(o, kind, p.GetSpec().DependsOn)
			if err == nil {
				for _, ref := range refs {
					// Only a dependency being deleted waits for o. Whoever may write o (a tenant's
					// Package, held in deletion by a finalizer of its own) must not wake a
					// ClusterPackage, a whole apply pass, at each edit.
					if ref.kind == ownKind && dependencyBeingDeleted(ctx, c, ref) {
						reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ref.namespace, Name: ref.name}})
					}
				}
			}
		}
		return reqs
	}
}

// dependencyBeingDeleted reports whether the installation ref names is being deleted, as the
// cache shows it; a read that fails counts as being deleted (a wake too many costs a reconcile).
func dependencyBeingDeleted(ctx context.Context, c client.Reader, ref dependencyRef) bool {
	var obj client.Object = &v1alpha1.Package{}
	if ref.kind == v1alpha1.ClusterPackageKind {
		obj = &v1alpha1.ClusterPackage{}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.namespace, Name: ref.name}, obj); err != nil {
		return !apierrors.IsNotFound(err)
	}
	return !obj.GetDeletionTimestamp().IsZero()
}

// dependencyChanged lets through the changes of an installation that its dependents' readiness
// check reads, or that its dependencies' teardown waits for: creation and deletion, a new
// generation, the Ready condition's status or reason, the observed generation, the applied
// revision, and the start of its deletion. Other status writes (phases, Reconciling) wake
// nobody: a dependent's reconcile is a whole apply pass.
type dependencyChanged struct {
	predicate.Funcs
}

func (dependencyChanged) Create(event.CreateEvent) bool   { return true }
func (dependencyChanged) Delete(event.DeleteEvent) bool   { return true }
func (dependencyChanged) Generic(event.GenericEvent) bool { return false }

func (dependencyChanged) Update(e event.UpdateEvent) bool {
	oldP, ok1 := e.ObjectOld.(packageObject)
	newP, ok2 := e.ObjectNew.(packageObject)
	if !ok1 || !ok2 {
		return false
	}
	if oldP.GetGeneration() != newP.GetGeneration() || oldP.GetDeletionTimestamp().IsZero() != newP.GetDeletionTimestamp().IsZero() {
		return true
	}
	oldS, newS := oldP.GetStatus(), newP.GetStatus()
	if oldS.ObservedGeneration != newS.ObservedGeneration || oldS.LastAppliedRevision != newS.LastAppliedRevision ||
		oldS.LastAppliedTag != newS.LastAppliedTag {
		return true
	}
	oldR, newR := conditions.Get(oldP, meta.ReadyCondition), conditions.Get(newP, meta.ReadyCondition)
	if (oldR == nil) != (newR == nil) {
		return true
	}
	return oldR != nil && (oldR.Status != newR.Status || oldR.Reason != newR.Reason) ||
		!equality.Semantic.DeepEqual(oldP.GetLabels(), newP.GetLabels())
}
