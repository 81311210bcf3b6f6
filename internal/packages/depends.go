package packages

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// dependsOnIndex indexes Packages and ClusterPackages by the installations their spec.dependsOn
// names (dependencyID), so that a dependency's change finds its dependents without a list of
// every resource.
const dependsOnIndex = "pkgsync.dev/dependsOn"

// Bounds of the walk that finds cycles: how long a chain of dependencies may be, and how many
// installations one walk reads (from the cache). A chain longer than that is refused
// (InvalidDependency) rather than followed: a resource's reconcile must not cost a walk over
// every installation of the cluster.
const (
	maxDependencyDepth   = 16
	maxDependencyVisited = 256
)

// dependencyRef is one entry of spec.dependsOn with its kind and namespace resolved.
type dependencyRef struct {
	kind, namespace, name, readyExpr string
}

func (d dependencyRef) String() string {
	if d.namespace == "" {
		return d.kind + " " + d.name
	}
	return d.kind + " " + d.namespace + "/" + d.name
}

// dependencyID is the value dependsOnIndex holds for an installation.
func dependencyID(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// dependenciesOf resolves the spec.dependsOn of obj: an empty kind is obj's own kind, a Package
// is in obj's namespace (a ClusterPackage has none). A ClusterPackage that names a Package
// (stored before the schema refused it) gets an error.
func dependenciesOf(obj client.Object, ownKind string, deps []v1alpha1.Dependency) ([]dependencyRef, error) {
	out := make([]dependencyRef, 0, len(deps))
	for i, d := range deps {
		kind := d.Kind
		if kind == "" {
			kind = ownKind
		}
		ref := dependencyRef{kind: kind, name: d.Name, readyExpr: d.ReadyExpr}
		switch {
		case kind == v1alpha1.PackageKind && obj.GetNamespace() == "":
			return nil, fmt.Errorf("spec.dependsOn[%d]: a ClusterPackage may depend on ClusterPackages only, not on Package %s", i, d.Name)
		case kind == v1alpha1.PackageKind:
			ref.namespace = obj.GetNamespace()
		case kind != v1alpha1.ClusterPackageKind:
			return nil, fmt.Errorf("spec.dependsOn[%d].kind: %q is neither Package nor ClusterPackage", i, kind)
		}
		out = append(out, ref)
	}
	return out, nil
}

// indexDependsOn is the dependsOnIndex function of Packages and ClusterPackages.
func indexDependsOn(ownKind string) func(client.Object) []string {
	return func(o client.Object) []string {
		p, ok := o.(packageObject)
		if !ok {
			return nil
		}
		refs, err := dependenciesOf(o, ownKind, p.GetSpec().DependsOn)
		if err != nil {
			return nil
		}
		ids := make([]string, 0, len(refs))
		for _, r := range refs {
			ids = append(ids, dependencyID(r.kind, r.namespace, r.name))
		}
		return ids
	}
}

// dependencyError holds a resource back because of its dependencies. Its reason is
// DependencyNotReady (waiting: a dependency's change wakes the resource), or DependencyCycle
// or InvalidDependency (stalled: only a change of spec can help).
type dependencyError struct {
	reason string
	msg    string
}

func (e *dependencyError) Error() string { return e.msg }

// dependencies reads installations for the dependency checks: from the manager's cache, which
// the watches that wake dependents keep.
type dependencies struct {
	reader client.Reader
	exprs  *readyExprs
}

// get reads one installation; nil when it does not exist.
func (d *dependencies) get(ctx context.Context, ref dependencyRef) (packageObject, error) {
	var obj packageObject = &v1alpha1.Package{}
	if ref.kind == v1alpha1.ClusterPackageKind {
		obj = &v1alpha1.ClusterPackage{}
	}
	if err := d.reader.Get(ctx, client.ObjectKey{Namespace: ref.namespace, Name: ref.name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read dependency %s: %w", ref, err)
	}
	return obj, nil
}

// check returns nil when every dependency of obj is ready, a *dependencyError when one is not
// (reason DependencyNotReady), a reconciler.StageError when spec.dependsOn cannot be used (a cycle, an
// invalid readyExpr: they stall), or the error of a read.
func (d *dependencies) check(ctx context.Context, obj packageObject, ownKind string) error {
	err := d.checkAll(ctx, obj, ownKind)
	var de *dependencyError
	if errors.As(err, &de) && de.reason != v1alpha1.DependencyNotReadyReason {
		return &reconciler.StageError{Reason: de.reason, Err: err}
	}
	return err
}

func (d *dependencies) checkAll(ctx context.Context, obj packageObject, ownKind string) error {
	spec := obj.GetSpec()
	if len(spec.DependsOn) == 0 {
		return nil
	}
	refs, err := dependenciesOf(obj, ownKind, spec.DependsOn)
	if err != nil {
		return &dependencyError{reason: v1alpha1.InvalidDependencyReason, msg: err.Error()}
	}
	self := dependencyRef{kind: ownKind, namespace: obj.GetNamespace(), name: obj.GetName()}
	if err := d.findCycle(ctx, self, refs); err != nil {
		return err
	}
	var waiting []string
	for _, ref := range refs {
		dep, err := d.get(ctx, ref)
		if err != nil {
			return err
		}
		why, err := d.notReady(ctx, ref, dep, obj)
		if err != nil {
			return err
		}
		if why != "" {
			waiting = append(waiting, why)
		}
	}
	if len(waiting) > 0 {
		return &dependencyError{reason: v1alpha1.DependencyNotReadyReason,
			msg: "waiting for dependencies, nothing applied: " + strings.Join(waiting, "; ")}
	}
	return nil
}

// notReady says why dep (nil: missing) is not ready for the dependent self, or "" when it is.
func (d *dependencies) notReady(ctx context.Context, ref dependencyRef, dep packageObject, self packageObject) (string, error) {
	switch {
	case dep == nil:
		return ref.String() + " does not exist", nil
	case !dep.GetDeletionTimestamp().IsZero():
		return ref.String() + " is being deleted", nil
	case ref.readyExpr != "":
		ok, err := d.exprs.eval(ctx, ref.readyExpr, dep, self)
		if err != nil {
			return "", &dependencyError{reason: v1alpha1.InvalidDependencyReason, msg: fmt.Sprintf("readyExpr of %s: %v", ref, err)}
		}
		if !ok {
			return ref.String() + ": readyExpr is false", nil
		}
		return "", nil
	}
	ready := conditions.Get(dep, meta.ReadyCondition)
	switch {
	case ready == nil:
		return ref.String() + " is not Ready yet", nil
	case ready.Status != "True":
		return fmt.Sprintf("%s is not Ready (%s)", ref, ready.Reason), nil
	case dep.GetStatus().ObservedGeneration != dep.GetGeneration():
		return ref.String() + " has not applied its current generation yet", nil
	}
	return "", nil
}

// findCycle walks spec.dependsOn from self's dependencies over the cached installations and
// returns a DependencyCycle error naming the cycle when a path leads back to self. Cycles that do
// not pass through self are the business of the resources on them. The walk is bounded in depth
// and in installations read.
func (d *dependencies) findCycle(ctx context.Context, self dependencyRef, refs []dependencyRef) error {
	visited := map[string]bool{}
	var walk func(path []dependencyRef, refs []dependencyRef) error
	walk = func(path []dependencyRef, refs []dependencyRef) error {
		for _, ref := range refs {
			if ref.kind == self.kind && ref.namespace == self.namespace && ref.name == self.name {
				return &dependencyError{reason: v1alpha1.DependencyCycleReason, msg: "dependency cycle: " + cycleString(append(path, ref))}
			}
			id := dependencyID(ref.kind, ref.namespace, ref.name)
			if visited[id] {
				continue
			}
			visited[id] = true
			if len(path) >= maxDependencyDepth || len(visited) > maxDependencyVisited {
				return &dependencyError{reason: v1alpha1.InvalidDependencyReason,
					msg: fmt.Sprintf("the dependencies of %s are more than %d deep or more than %d installations: not followed", self, maxDependencyDepth, maxDependencyVisited)}
			}
			dep, err := d.get(ctx, ref)
			if err != nil {
				return err
			}
			if dep == nil {
				continue
			}
			next, err := dependenciesOf(dep, ref.kind, dep.GetSpec().DependsOn)
			if err != nil {
				// That resource reports it itself.
				continue
			}
			if err := walk(append(path, ref), next); err != nil {
				return err
			}
		}
		return nil
	}
	return walk([]dependencyRef{self}, refs)
}

func cycleString(path []dependencyRef) string {
	names := make([]string, len(path))
	for i, r := range path {
		names[i] = r.String()
	}
	return strings.Join(names, " → ")
}

// dependsOnTransitively reports whether from depends on to through spec.dependsOn, walked as
// findCycle walks (a chain that is too long counts as no).
func (d *dependencies) dependsOnTransitively(ctx context.Context, from packageObject, fromKind string, to dependencyRef) bool {
	refs, err := dependenciesOf(from, fromKind, from.GetSpec().DependsOn)
	if err != nil {
		return false
	}
	// A path from from's dependencies to to is what findCycle finds with to as its start.
	var de *dependencyError
	return errors.As(d.findCycle(ctx, to, refs), &de) && de.reason == v1alpha1.DependencyCycleReason
}

// dependentsBeingDeleted lists the installations that depend on obj and are being deleted,
// still holding pkgsync's finalizer: obj's teardown waits for them, so that a dependent is torn
// down before what it depends on. A dependent that is not being deleted holds nothing up (obj
// goes, and the dependent reports DependencyNotReady), nor does one obj itself depends on
// (a cycle, which would otherwise wait forever on both sides).
func (d *dependencies) dependentsBeingDeleted(ctx context.Context, obj packageObject, ownKind string) ([]string, error) {
	self := dependencyRef{kind: ownKind, namespace: obj.GetNamespace(), name: obj.GetName()}
	match := client.MatchingFields{dependsOnIndex: dependencyID(self.kind, self.namespace, self.name)}
	var dependents []dependent
	packages := &v1alpha1.PackageList{}
	opts := []client.ListOption{match}
	if self.namespace != "" {
		opts = append(opts, client.InNamespace(self.namespace))
	}
	if err := d.reader.List(ctx, packages, opts...); err != nil {
		return nil, fmt.Errorf("list dependents: %w", err)
	}
	for i := range packages.Items {
		dependents = append(dependents, dependent{&packages.Items[i], v1alpha1.PackageKind})
	}
	if self.namespace == "" {
		cluster := &v1alpha1.ClusterPackageList{}
		if err := d.reader.List(ctx, cluster, match); err != nil {
			return nil, fmt.Errorf("list dependents: %w", err)
		}
		for i := range cluster.Items {
			dependents = append(dependents, dependent{&cluster.Items[i], v1alpha1.ClusterPackageKind})
		}
	}
	var waiting []string
	for _, dep := range dependents {
		o := dep.obj
		if o.GetDeletionTimestamp().IsZero() || !controllerutil.ContainsFinalizer(o, v1alpha1.FinalizerName) {
			continue
		}
		ref := dependencyRef{kind: dep.kind, namespace: o.GetNamespace(), name: o.GetName()}
		if d.dependsOnTransitively(ctx, obj, ownKind, ref) {
			continue
		}
		waiting = append(waiting, ref.String())
	}
	return waiting, nil
}

type dependent struct {
	obj  packageObject
	kind string
}

// dependentsFirst holds the teardown of obj while installations that depend on it are being
// deleted (dependentsBeingDeleted), for reconciler.MaxDependentTeardownWait after obj's deletion at most.
// wait reports that it held it: Ready=False, reason Deleting, naming them. Their deletion wakes
// obj (watchDependencies); the requeue is for the bound.
func (r *packageSteps[T]) dependentsFirst(ctx context.Context, obj T) (res ctrl.Result, wait bool, err error) {
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerName) {
		return ctrl.Result{}, false, nil
	}
	deadline := obj.GetDeletionTimestamp().Add(reconciler.MaxDependentTeardownWait)
	if !time.Now().Before(deadline) {
		return ctrl.Result{}, false, nil
	}
	waiting, err := r.deps.dependentsBeingDeleted(ctx, obj, r.kind)
	if err != nil || len(waiting) == 0 {
		return ctrl.Result{}, false, err
	}
	return reconciler.Settle(obj, reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.DeletingReason,
		Message: fmt.Sprintf("deleting: waiting for %s, which depend on this one and are being deleted, to be torn down first (at most until %s)",
			strings.Join(waiting, ", "), deadline.UTC().Format(time.RFC3339)),
		Wake: time.Until(deadline) + time.Second}, r.intervals(obj)), true, nil
}
