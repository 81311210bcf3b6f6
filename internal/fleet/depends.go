package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// spec.dependsOn between fleets: on each HostedCluster, a fleet's member is created or moved only
// once the members of the fleets it names are Ready there on their own fleets' revisions
// (dependencyGate); a fleet whose dependencies lead back to itself is refused (findCycle); and a
// member is torn down only after the members of the fleets that name its fleet are gone from
// its cluster (depends_teardown.go). Everything is read from the manager's cache.

// maxFleetDependencyVisited bounds the fleets one walk of spec.dependsOn reads: a fleet's
// reconcile must not cost a walk over every fleet of the cluster.
const maxFleetDependencyVisited = 64

// fleetLookup reads a fleet by name; nil, nil when it does not exist.
type fleetLookup func(ctx context.Context, name string) (*v1alpha1.HostedClusterPackage, error)

// cachedFleet is the fleetLookup of the manager's cache.
func (r *fleetSteps) cachedFleet(ctx context.Context, name string) (*v1alpha1.HostedClusterPackage, error) {
	f := &v1alpha1.HostedClusterPackage{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read HostedClusterPackage %s (spec.dependsOn): %w", name, err)
	}
	return f, nil
}

// findCycle walks spec.dependsOn from the fleet's dependencies and refuses the spec (a
// *reconciler.StageError, reason DependencyCycle) when a path leads back to the fleet, naming
// it ("a → b → a"). Cycles that do not pass through the fleet are the business of the fleets on
// them. A walk over more than maxFleetDependencyVisited fleets is refused (InvalidDependency).
func findCycle(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, lookup fleetLookup) error {
	path, err := pathTo(ctx, fleet.Spec.DependsOn, fleet.Name, []string{fleet.Name}, lookup, map[string]bool{})
	switch {
	case err != nil:
		return err
	case path != nil:
		return &reconciler.StageError{Reason: v1alpha1.DependencyCycleReason,
			Err: fmt.Errorf("spec.dependsOn: dependency cycle: %s: no member is written until it is broken", strings.Join(path, " → "))}
	}
	return nil
}

// dependsOnFleet reports whether fleet depends on name, directly or through the fleets it names.
// A walk that is too long counts as yes: the teardown, which asks, then does not wait for name,
// so that fleets on a cycle too long to follow do not wait for each other.
func dependsOnFleet(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, name string, lookup fleetLookup) (bool, error) {
	path, err := pathTo(ctx, fleet.Spec.DependsOn, name, nil, lookup, map[string]bool{})
	if stage := (*reconciler.StageError)(nil); errors.As(err, &stage) {
		return true, nil
	}
	return path != nil, err
}

// pathTo returns the path of fleet names (after path) from deps to the fleet named to, nil when
// there is none. visited bounds the walk.
func pathTo(ctx context.Context, deps []v1alpha1.FleetDependency, to string, path []string, lookup fleetLookup, visited map[string]bool) ([]string, error) {
	for _, d := range deps {
		if d.Name == to {
			return append(slices.Clip(path), d.Name), nil
		}
		if visited[d.Name] {
			continue
		}
		visited[d.Name] = true
		if len(visited) > maxFleetDependencyVisited {
			return nil, &reconciler.StageError{Reason: v1alpha1.InvalidDependencyReason,
				Err: fmt.Errorf("spec.dependsOn leads to more than %d HostedClusterPackages: not followed", maxFleetDependencyVisited)}
		}
		dep, err := lookup(ctx, d.Name)
		if err != nil {
			return nil, err
		}
		if dep == nil {
			continue
		}
		found, err := pathTo(ctx, dep.Spec.DependsOn, to, append(slices.Clip(path), d.Name), lookup, visited)
		if err != nil || found != nil {
			return found, err
		}
	}
	return nil, nil
}

// dependency is what a fleet reads of one fleet its spec.dependsOn names.
type dependency struct {
	name string
	// why the fleet itself lets no member through ("does not exist"); "" when it is up to
	// its member on each cluster.
	why string
	// revision its members must be Ready on.
	revision string
	// selector of its HostedClusters, to say why it has no member on one.
	selector labels.Selector
	// members are its own members, by namespace.
	members map[string]*v1alpha1.Package
}

// dependencyRevision is the revision a fleet's members must be Ready on for the fleets that
// depend on it: its target, or its stable revision while a rollback takes the target back (the
// revision its rollout then moves members to); "" when it has no target.
func dependencyRevision(f *v1alpha1.HostedClusterPackage) string {
	st := &f.Status
	switch {
	case st.Target == nil:
		return ""
	case st.Rejected != nil && st.Rejected.Name == st.Target.Name && st.Stable != nil:
		return st.Stable.Name
	}
	return st.Target.Name
}

// readDependency reads the fleet name and its members.
func (r *fleetSteps) readDependency(ctx context.Context, name string) (*dependency, error) {
	d := &dependency{name: name}
	f, err := r.cachedFleet(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case f == nil:
		d.why = "does not exist"
		return d, nil
	case !f.DeletionTimestamp.IsZero():
		d.why = "is being deleted"
		return d, nil
	}
	if d.revision = dependencyRevision(f); d.revision == "" {
		d.why = "has no target revision yet"
		return d, nil
	}
	d.selector = labels.Everything()
	if f.Spec.HostedClusterSelector != nil {
		if d.selector, err = metav1.LabelSelectorAsSelector(f.Spec.HostedClusterSelector); err != nil {
			d.selector = labels.Nothing()
		}
	}
	owned, err := r.listMembers(ctx, r.client, f)
	if err != nil {
		return nil, fmt.Errorf("fleet %s (spec.dependsOn): %w", name, err)
	}
	d.members = make(map[string]*v1alpha1.Package, len(owned))
	for _, p := range owned {
		d.members[p.Namespace] = p
	}
	return d, nil
}

// notReady says why the dependency lets the member m not through, "" when it does.
func (d *dependency) notReady(m *rollout.Member) string {
	if d.why != "" {
		return fmt.Sprintf("fleet %s %s", d.name, d.why)
	}
	p := d.members[m.Namespace]
	switch {
	case p == nil && !d.selector.Matches(labels.Set(m.Labels)):
		return fmt.Sprintf("fleet %s does not select this HostedCluster: it has no member here", d.name)
	case !d.selector.Matches(labels.Set(m.Labels)):
		// Its member stays until this fleet's is gone (teardown in reverse), on the revision it
		// had: say why it does not follow its fleet's revision.
		return fmt.Sprintf("fleet %s no longer selects this HostedCluster: its member here is kept, not updated, until this fleet's member goes", d.name)
	case p == nil:
		return fmt.Sprintf("fleet %s has no member here yet", d.name)
	case !p.DeletionTimestamp.IsZero():
		return fmt.Sprintf("fleet %s: its member here is being deleted", d.name)
	case p.Annotations[v1alpha1.FleetRevisionAnnotation] != d.revision:
		return fmt.Sprintf("fleet %s: its member here is on revision %q, not on its revision %s yet", d.name,
			reconciler.BoundMessage(p.Annotations[v1alpha1.FleetRevisionAnnotation], 64), d.revision)
	case !rollout.PackageReady(p):
		return fmt.Sprintf("fleet %s: its member here is not Ready on revision %s yet (%s)", d.name, d.revision, readyReason(p))
	}
	return ""
}

// readyReason is the reason of a Package's Ready condition, or why it has none that counts.
func readyReason(p *v1alpha1.Package) string {
	switch c := conditions.Get(p, meta.ReadyCondition); {
	case c == nil:
		return "no Ready condition yet"
	case c.Status == metav1.ConditionTrue:
		return fmt.Sprintf("generation %d not observed yet", p.Generation)
	default:
		return c.Reason
	}
}

// dependencyWaits are the members that wait for the fleets spec.dependsOn names: why, for
// rollout.Gates.Waiting, and which of those fleets each waits for, so that
// status.dependencies[].waiting counts only the members the plan set aside (countWaited).
type dependencyWaits struct {
	why map[string]string
	on  map[string][]int
}

// dependencyGate reads the fleets spec.dependsOn names and returns the members that wait for
// them, and sets status.dependencies (waiting counted by countWaited, after the plan). A
// member waits when it would be written to a revision it is not on: it has no member yet, or
// is on neither the target nor moveTo (the revision the plan moves members to: the stable one
// during a rollback). A member already there does not wait, so that a dependency's new rollout
// never holds back what is in place.
func (r *fleetSteps) dependencyGate(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, members []*rollout.Member, target, moveTo string) (dependencyWaits, error) {
	waits := dependencyWaits{why: map[string]string{}, on: map[string][]int{}}
	deps := fleet.Spec.DependsOn
	if len(deps) == 0 {
		fleet.Status.Dependencies = nil
		return waits, nil
	}
	read := make([]*dependency, 0, len(deps))
	statuses := make([]v1alpha1.FleetDependencyStatus, 0, len(deps))
	for _, d := range deps {
		dep, err := r.readDependency(ctx, d.Name)
		if err != nil {
			return waits, err
		}
		read = append(read, dep)
		st := v1alpha1.FleetDependencyStatus{Name: d.Name, Revision: dep.revision}
		if dep.why != "" {
			st.Message = "fleet " + d.Name + " " + dep.why + ": every member that is to move waits"
		}
		statuses = append(statuses, st)
	}
	for _, m := range members {
		if m.Pkg != nil && (m.Revision() == target || m.Revision() == moveTo) {
			continue
		}
		var why []string
		for i, dep := range read {
			if w := dep.notReady(m); w != "" {
				why = append(why, w)
				waits.on[m.Namespace] = append(waits.on[m.Namespace], i)
			}
		}
		if len(why) > 0 {
			waits.why[m.Namespace] = "waiting for the fleets spec.dependsOn names: " + strings.Join(why, "; ")
		}
	}
	fleet.Status.Dependencies = statuses
	return waits, nil
}

// countWaited counts, in status.dependencies, the members the plan set aside for each fleet
// named: those blocked with reason DependencyNotReady, and no member held or set aside for
// another reason, or kept where it is in a partition the rollout has not reached.
func (w dependencyWaits) countWaited(fleet *v1alpha1.HostedClusterPackage, waited map[string]bool) {
	for ns := range waited {
		for _, i := range w.on[ns] {
			if i < len(fleet.Status.Dependencies) {
				fleet.Status.Dependencies[i].Waiting++
			}
		}
	}
}
