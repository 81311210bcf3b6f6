package packages

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// constraintReasons are the Ready reasons of the constraints a package's manifest declares.
var constraintReasons = map[string]string{
	render.ConstraintPlatform:        v1alpha1.PlatformConstraintViolatedReason,
	render.ConstraintPlatformVersion: v1alpha1.PlatformVersionConstraintViolatedReason,
	render.ConstraintUniqueInScope:   v1alpha1.UniqueInScopeConstraintViolatedReason,
}

// constraintViolated tags a violated constraint with the reason naming it; other errors pass.
func constraintViolated(err error) error {
	var ce *render.ConstraintError
	if errors.As(err, &ce) {
		return &reconciler.StageError{Reason: constraintReasons[ce.Constraint], Err: err}
	}
	return err
}

// checkUniqueInstallation enforces a manifest's uniqueInScope constraint: one installation of
// the package per namespace for Packages, per cluster for ClusterPackages. Another resource
// installs the same package when its spec.image names the same repository and its
// spec.component is the same; of two, the one created first (then the first by name) keeps it.
// self is obj's spec.image as the reconcile parsed it (admit), before it was resolved.
func (r *packageSteps[T]) checkUniqueInstallation(ctx context.Context, obj T, self source.Reference, manifest *v1alpha1.PackageManifest) error {
	idx, unique := render.UniqueInstallation(manifest)
	if !unique {
		return nil
	}
	var others []packageObject
	per := "cluster"
	if ns := obj.GetNamespace(); ns != "" {
		per = "namespace"
		list := &v1alpha1.PackageList{}
		if err := r.applier.Reader.List(ctx, list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list Packages for the uniqueInScope constraint: %w", err)
		}
		for i := range list.Items {
			others = append(others, &list.Items[i])
		}
	} else {
		list := &v1alpha1.ClusterPackageList{}
		if err := r.applier.Reader.List(ctx, list); err != nil {
			return fmt.Errorf("list ClusterPackages for the uniqueInScope constraint: %w", err)
		}
		for i := range list.Items {
			others = append(others, &list.Items[i])
		}
	}
	st := obj.GetCreationTimestamp()
	for _, other := range others {
		if other.GetUID() == obj.GetUID() || other.GetDeletionTimestamp() != nil {
			continue
		}
		ref, err := source.ParseReference(other.GetSpec().Image)
		if err != nil || ref.Name() != self.Name() || other.GetSpec().Component != obj.GetSpec().Component {
			continue
		}
		ot := other.GetCreationTimestamp()
		if ot.Before(&st) || ot.Equal(&st) && other.GetName() < obj.GetName() {
			return &render.ConstraintError{Constraint: render.ConstraintUniqueInScope, Index: idx,
				Detail: fmt.Sprintf("the package allows one installation per %s, and %s already installs %s", per, describeInstallation(other), self.Name())}
		}
	}
	return nil
}

func describeInstallation(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return "ClusterPackage " + obj.GetName()
	}
	return "Package " + obj.GetNamespace() + "/" + obj.GetName()
}
