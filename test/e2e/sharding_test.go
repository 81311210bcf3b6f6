package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// reconcilesOf is how many reconciles of one object process p recorded
// (gotk_reconcile_duration_seconds, by kind, namespace and name); 0 when it has none.
func reconcilesOf(ctx context.Context, ct assert.TestingT, p *controllerProc, kind, namespace, name string) float64 {
	m, err := p.scrape(ctx)
	if !assert.NoError(ct, err) {
		return 0
	}
	n, _ := sum(m, "gotk_reconcile_duration_seconds", map[string]string{"kind": kind, "namespace": namespace, "name": name})
	return n
}

// TestShardedFleets runs two controller processes over one management cluster with disjoint
// selectors, both with leader election and the default lease name: one for fleetShard=a, one
// for the resources without fleetShard. Each fleet and its members are reconciled by exactly
// one of them (counted per object from each process's metrics), the members carry their
// fleet's shard labels, and neither process waits for the other's lease.
func TestShardedFleets(t *testing.T) {
	t.Parallel()
	const fleetShard = "e2e.pkgsync.dev/fleet-shard"
	leases := newNamespace(t)
	// Everything here carries shardLabel=sharding, which keeps the suite's shared controller
	// away (it reconciles what has no shardLabel).
	base := shardLabel + "=sharding"
	procA := runController(t, "sharding", "--watch-label-selector", base+","+fleetShard+"=a", "--leader-elect", "--namespace", leases)
	procB := runController(t, "sharding", "--watch-label-selector", base+",!"+fleetShard, "--leader-elect", "--namespace", leases)

	registry := suite.registry.Host
	nsA, nsB := newNamespace(t), newNamespace(t)
	clustersA := newFleetClusters(t, nsA, nsA, "x", "y")
	clustersB := newFleetClusters(t, nsB, nsB, "x", "y")
	repo := "fleet-shard/" + nsA
	digest := pushPackageTo(t, writePackage(t, fleetPackage("1", false)), registry+"/"+repo+":v1")
	fleetOf := func(name, hcNamespace string, lbls map[string]string) *v1alpha1.HostedClusterPackage {
		return &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
				Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1"}},
			},
		}
	}
	fleetA := fleetOf("shard-a-"+nsA[len(nsA)-8:], nsA, map[string]string{shardLabel: "sharding", fleetShard: "a"})
	fleetB := fleetOf("shard-none-"+nsB[len(nsB)-8:], nsB, map[string]string{shardLabel: "sharding"})
	newFleet(t, fleetA)
	newFleet(t, fleetB)
	waitForFleet(t, fleetA.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)
	waitForFleet(t, fleetB.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)

	membersA := fleetMembers(t, t.Context(), fleetA.Name)
	membersB := fleetMembers(t, t.Context(), fleetB.Name)
	assert.Len(t, membersA, len(clustersA))
	assert.Len(t, membersB, len(clustersB))
	for ns, m := range membersA {
		assert.Equal(t, "a", m.Labels[fleetShard], "member %s carries its fleet's shard", ns)
		assert.Equal(t, "sharding", m.Labels[shardLabel], ns)
	}
	for ns, m := range membersB {
		assert.NotContains(t, m.Labels, fleetShard, "member %s of an unlabelled fleet is unlabelled", ns)
		assert.Equal(t, "sharding", m.Labels[shardLabel], ns)
	}

	type object struct{ kind, namespace, name string }
	objectsOf := func(fleet *v1alpha1.HostedClusterPackage, members map[string]v1alpha1.Package) []object {
		out := []object{{v1alpha1.HostedClusterPackageKind, "", fleet.Name}}
		for ns := range members {
			out = append(out, object{v1alpha1.PackageKind, ns, fleet.Name})
		}
		return out
	}
	for _, c := range []struct {
		objects      []object
		owner, other *controllerProc
	}{
		{objectsOf(fleetA, membersA), procA, procB},
		{objectsOf(fleetB, membersB), procB, procA},
	} {
		eventually(t, func(a *attempt) {
			for _, o := range c.objects {
				assert.Positive(a, reconcilesOf(a.Context(), a, c.owner, o.kind, o.namespace, o.name), "%v reconciled by its shard", o)
				assert.Zero(a, reconcilesOf(a.Context(), a, c.other, o.kind, o.namespace, o.name), "%v reconciled by the other shard", o)
			}
		})
	}
	// Both lead their own lease: neither waits for the other.
	for _, p := range []*controllerProc{procA, procB} {
		assert.Equal(t, 1.0, currentMetric(t, p, "leader_election_master_status", nil))
	}
}
