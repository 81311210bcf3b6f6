package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// keepMembers writes each member the plan assigns a revision, and the ownership of the others
// (keepOwnership), and returns the members that could not be written.
func (r *fleetSteps) keepMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, plan rollout.Plan, members []*rollout.Member,
	target *v1alpha1.FleetRevision, now time.Time) []v1alpha1.MemberStatus {
	spec := &fleet.Spec
	targetSource := fleetRevisionSource{name: target.Name, image: target.Image, template: &spec.Template, overrides: spec.ConfigOverrides}
	var stableSource fleetRevisionSource
	if s := fleet.Status.Stable; s != nil {
		stableSource = fleetRevisionSource{name: s.Name, image: s.Image, template: &s.Template, overrides: s.ConfigOverrides}
	}
	var problems []v1alpha1.MemberStatus
	for _, m := range members {
		var src fleetRevisionSource
		switch plan.Assign[m.Namespace] {
		case rollout.ToTarget:
			src = targetSource
		case rollout.ToStable:
			src = stableSource
		default:
			if err := keepOwnership(ctx, r.client, m, fleet); err != nil {
				problems = append(problems, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: m.Partition, Reason: memberErrorReason(err), Message: err.Error()})
			}
			continue
		}
		if err := r.keepMember(ctx, fleet, src, m, now); err != nil {
			problems = append(problems, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: m.Partition, Reason: memberErrorReason(err), Message: err.Error()})
		}
	}
	return problems
}

// keepMember creates or corrects one member; a member that already is what it should be costs
// no request.
func (r *fleetSteps) keepMember(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, src fleetRevisionSource, m *rollout.Member, now time.Time) error {
	desired, err := desiredMember(fleet, src, m, now)
	if err != nil {
		return &reconciler.StageError{Reason: v1alpha1.InvalidConfigReason, Err: err}
	}
	withShardLabels(desired, fleet, r.options.ShardLabelKeys)
	if m.Pending && m.Revision() == src.name {
		return nil // written moments ago; the cache has not caught up
	}
	if m.Pkg != nil && !m.Pending && memberUpToDate(m.Pkg, desired, fleet) {
		return nil
	}
	existing := m.Pkg
	if m.Pending {
		// The cache is behind the fleet's own write: read the member as it is now.
		existing = &v1alpha1.Package{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: fleet.Name}, existing); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("read member %s/%s: %w", m.Namespace, fleet.Name, err)
			}
			existing = nil
		}
	}
	generation, err := writeMember(ctx, r.client, fleet, existing, desired)
	if err != nil {
		return err
	}
	r.writes.remember(fleet, m.Namespace, generation, src.name)
	return nil
}

// removeStrayMembers deletes the fleet's members whose HostedCluster is gone or no longer
// selected. Each one's finalizer tears its objects down. A member in a namespace of a collision
// stays: which HostedCluster it serves cannot be told, and deleting it would tear down what it
// installed because someone created a HostedCluster with a colliding name. So does one the
// member of a fleet that depends on this one is still beside (dependentMembers), with an event
// saying so, until that member goes.
func (r *fleetSteps) removeStrayMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, members []*rollout.Member, collisions []v1alpha1.MemberStatus,
	owned []*v1alpha1.Package) error {
	keep := map[string]bool{}
	for _, m := range members {
		keep[m.Namespace] = true
	}
	for _, c := range collisions {
		keep[c.Namespace] = true
	}
	var dependents map[string][]string
	announced := 0 // events per pass are bounded as the status lists are; the recorder folds repeats
	for _, p := range owned {
		if keep[p.Namespace] || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if dependents == nil {
			var err error
			if dependents, err = r.dependentMembers(ctx, fleet); err != nil {
				return err
			}
		}
		if names := dependents[p.Namespace]; len(names) > 0 {
			if announced < maxListedMembers {
				announced++
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.DeletingReason, "member of a HostedCluster no longer selected: %s", teardownWait(p.Namespace, names))
			}
			continue
		}
		if err := r.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete member %s/%s: %w", p.Namespace, p.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("removed member of a HostedCluster no longer selected", "namespace", p.Namespace)
	}
	return nil
}

func memberErrorReason(err error) string {
	var stage *reconciler.StageError
	switch {
	case errors.As(err, &stage):
		return stage.Reason
	case apierrors.IsNotFound(err):
		return v1alpha1.NamespaceNotFoundReason
	}
	return v1alpha1.MemberWriteFailedReason
}
