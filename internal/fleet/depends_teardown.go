package fleet

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Teardown in reverse of spec.dependsOn: a member of this fleet is not deleted while a fleet
// that names this one in its spec.dependsOn still exists and still has its own member on the
// same HostedCluster (the same namespace), so that what the dependent installed goes before
// what it depends on. A dependent being deleted counts until its member is gone; one deleted
// with deletionPolicy Orphan releases its members, which are then no fleet's and hold nothing.
// Two fleets on a cycle do not wait for each other. The dependent member's deletion wakes this
// fleet (dependencyWakes).

// fleetDependsOnIndex indexes HostedClusterPackages by the names their spec.dependsOn lists, so
// that a fleet finds the fleets that depend on it, and a member's change the fleets to wake,
// without a list of every fleet.
const fleetDependsOnIndex = "pkgsync.dev/fleetDependsOn"

// indexFleetDependsOn is fleetDependsOnIndex's function.
func indexFleetDependsOn(o client.Object) []string {
	f, ok := o.(*v1alpha1.HostedClusterPackage)
	if !ok {
		return nil
	}
	names := make([]string, 0, len(f.Spec.DependsOn))
	for _, d := range f.Spec.DependsOn {
		names = append(names, d.Name)
	}
	return names
}

// dependentMembers maps each namespace where a fleet that depends on this one keeps a member to
// those fleets' names: this fleet's member there waits for them to go. A fleet this one itself
// depends on is left out: the two are on a cycle, and would wait for each other forever.
func (r *fleetSteps) dependentMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) (map[string][]string, error) {
	list := &v1alpha1.HostedClusterPackageList{}
	if err := r.client.List(ctx, list, client.MatchingFields{fleetDependsOnIndex: fleet.Name}); err != nil {
		return nil, fmt.Errorf("list the HostedClusterPackages that depend on this one: %w", err)
	}
	out := map[string][]string{}
	for i := range list.Items {
		d := &list.Items[i]
		if d.Name == fleet.Name {
			continue
		}
		cycle, err := dependsOnFleet(ctx, fleet, d.Name, r.cachedFleet)
		if err != nil {
			return nil, err
		}
		if cycle {
			continue
		}
		owned, err := r.listMembers(ctx, r.client, d)
		if err != nil {
			return nil, fmt.Errorf("fleet %s, which depends on this one: %w", d.Name, err)
		}
		for _, p := range owned {
			out[p.Namespace] = append(out[p.Namespace], d.Name)
		}
	}
	return out, nil
}

// teardownWait says, for a member in namespace that waits for the members of dependents there,
// what it waits for.
func teardownWait(namespace string, dependents []string) string {
	return fmt.Sprintf("%s waits for the member(s) of %s there to be torn down first (their spec.dependsOn names this fleet)",
		namespace, strings.Join(dependents, ", "))
}

// describeWaits names the first three waits, and how many more there are.
func describeWaits(waits []string) string {
	if len(waits) > 3 {
		return strings.Join(waits[:3], "; ") + fmt.Sprintf("; and %d more", len(waits)-3)
	}
	return strings.Join(waits, "; ")
}
