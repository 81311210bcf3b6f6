package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// dependingFleet is a fleet named name whose spec.dependsOn names deps.
func dependingFleet(name string, deps ...string) *v1alpha1.HostedClusterPackage {
	f := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid")}}
	for _, d := range deps {
		f.Spec.DependsOn = append(f.Spec.DependsOn, v1alpha1.FleetDependency{Name: d})
	}
	return f
}

func lookupIn(fleets ...*v1alpha1.HostedClusterPackage) fleetLookup {
	byName := map[string]*v1alpha1.HostedClusterPackage{}
	for _, f := range fleets {
		byName[f.Name] = f
	}
	return func(_ context.Context, name string) (*v1alpha1.HostedClusterPackage, error) { return byName[name], nil }
}

// TestFindCycle: a fleet whose spec.dependsOn leads back to itself is refused with the cycle
// named, itself included (a → a); a cycle it only leads to is the business of the fleets on it;
// a walk over too many fleets is refused rather than followed.
func TestFindCycle(t *testing.T) {
	t.Parallel()
	long := []*v1alpha1.HostedClusterPackage{}
	for i := range maxFleetDependencyVisited + 2 {
		long = append(long, dependingFleet(fmt.Sprintf("f%d", i), fmt.Sprintf("f%d", i+1)))
	}
	tests := []struct {
		name   string
		fleet  *v1alpha1.HostedClusterPackage
		others []*v1alpha1.HostedClusterPackage
		reason string // "" for no error
		says   string
	}{
		{"no dependencies", dependingFleet("a"), nil, "", ""},
		{"itself", dependingFleet("a", "a"), nil, v1alpha1.DependencyCycleReason, "dependency cycle: a → a"},
		{"through another", dependingFleet("a", "b"), []*v1alpha1.HostedClusterPackage{dependingFleet("b", "a")}, v1alpha1.DependencyCycleReason, "dependency cycle: a → b → a"},
		{"three long, after a fleet without one", dependingFleet("a", "x", "b"),
			[]*v1alpha1.HostedClusterPackage{dependingFleet("x"), dependingFleet("b", "c"), dependingFleet("c", "a")}, v1alpha1.DependencyCycleReason, "a → b → c → a"},
		{"a chain, a missing fleet, a shared dependency", dependingFleet("a", "b", "c", "gone"),
			[]*v1alpha1.HostedClusterPackage{dependingFleet("b", "c"), dependingFleet("c")}, "", ""},
		{"a cycle it leads to, not through it", dependingFleet("a", "b"),
			[]*v1alpha1.HostedClusterPackage{dependingFleet("b", "c"), dependingFleet("c", "b")}, "", ""},
		{"too many fleets to walk", long[0], long[1:], v1alpha1.InvalidDependencyReason, "more than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := findCycle(t.Context(), tt.fleet, lookupIn(append(tt.others, tt.fleet)...))
			if tt.reason == "" {
				assert.NoError(t, err)
				return
			}
			var stage *reconciler.StageError
			if assert.True(t, errors.As(err, &stage), "%v", err) {
				assert.Equal(t, tt.reason, stage.Reason)
				assert.True(t, reconciler.IsStalling(stage.Reason), "a refused spec stalls")
			}
			assert.ErrorContains(t, err, tt.says)
		})
	}
}

// depMember is a member Package of fleet in namespace ns on revision rev, Ready or not.
func depMember(fleet *v1alpha1.HostedClusterPackage, ns, rev string, ready bool) *v1alpha1.Package {
	p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleet.Name, Generation: 3,
		Labels:      map[string]string{v1alpha1.FleetLabel: fleet.Name},
		Annotations: map[string]string{v1alpha1.FleetUIDAnnotation: string(fleet.UID), v1alpha1.FleetRevisionAnnotation: rev}}}
	status, reason := metav1.ConditionFalse, v1alpha1.PhaseProgressingReason
	if ready {
		status, reason = metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason
	}
	p.Status.ObservedGeneration = 3
	p.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: status, Reason: reason, ObservedGeneration: 3, LastTransitionTime: metav1.Now()}}
	return p
}

// TestDependencyGate: on each cluster, a member that is to be created or moved waits until the
// member of the fleet it depends on there is Ready on that fleet's revision, and says why
// (absent, not selected, on another revision, not Ready); members already where they are to be
// do not wait; a missing fleet holds every member that is to move, and says so once in
// status.dependencies.
func TestDependencyGate(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	network := dependingFleet("network")
	network.Spec.HostedClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"network": "yes"}}
	network.Status.Target = &v1alpha1.FleetRevision{Name: "net-2"}
	network.Status.Stable = &v1alpha1.FleetStableRevision{FleetRevision: v1alpha1.FleetRevision{Name: "net-1"}}
	forged := depMember(network, "clusters-forged", "net-2", true)
	forged.Annotations[v1alpha1.FleetUIDAnnotation] = "guessed"
	r, _ := f.steps(t, false, network, forged,
		depMember(network, "clusters-ready", "net-2", true),
		depMember(network, "clusters-old", "net-1", true),
		depMember(network, "clusters-progressing", "net-2", false),
		depMember(network, "clusters-kept", "net-1", true),
		depMember(network, "clusters-deselected", "net-1", true))
	selected := map[string]string{"network": "yes"}
	m := func(ns string, labels map[string]string, pkg *v1alpha1.Package) *rollout.Member {
		return &rollout.Member{Namespace: ns, Labels: labels, Pkg: pkg}
	}
	monitoring := dependingFleet("monitoring", "network")
	members := []*rollout.Member{
		m("clusters-ready", selected, nil),
		m("clusters-old", selected, nil),
		m("clusters-progressing", selected, depMember(monitoring, "clusters-progressing", "mon-1", true)),
		m("clusters-kept", selected, depMember(monitoring, "clusters-kept", "mon-2", true)),
		m("clusters-forged", selected, nil),
		m("clusters-new", selected, nil),
		m("clusters-unselected", map[string]string{"network": "no"}, nil),
		m("clusters-deselected", map[string]string{"network": "no"}, nil),
	}
	waits, err := r.dependencyGate(t.Context(), monitoring, members, "mon-2", "mon-2")
	require.NoError(t, err)
	waiting := waits.why
	assert.NotContains(t, waiting, "clusters-ready", "network is Ready on its target there")
	assert.NotContains(t, waiting, "clusters-kept", "already on the target: a dependency's rollout does not hold it back")
	for ns, says := range map[string]string{
		"clusters-old":         `fleet network: its member here is on revision "net-1", not on its revision net-2 yet`,
		"clusters-progressing": "fleet network: its member here is not Ready on revision net-2 yet (PhaseProgressing)",
		"clusters-forged":      "fleet network has no member here yet",
		"clusters-new":         "fleet network has no member here yet",
		"clusters-unselected":  "fleet network does not select this HostedCluster",
		"clusters-deselected":  "fleet network no longer selects this HostedCluster: its member here is kept, not updated, until this fleet's member goes",
	} {
		assert.Contains(t, waiting[ns], says, ns)
	}
	assert.Equal(t, []v1alpha1.FleetDependencyStatus{{Name: "network", Revision: "net-2"}}, monitoring.Status.Dependencies)
	// The counts are those of the members the plan set aside, not of every member that would wait.
	waits.countWaited(monitoring, map[string]bool{"clusters-old": true, "clusters-new": true})
	assert.Equal(t, []v1alpha1.FleetDependencyStatus{{Name: "network", Revision: "net-2", Waiting: 2}}, monitoring.Status.Dependencies)

	// A rollback of network: its members must be Ready on its stable revision.
	network.Status.Rejected = &v1alpha1.FleetRejectedRevision{FleetRevision: v1alpha1.FleetRevision{Name: "net-2"}}
	assert.Equal(t, "net-1", dependencyRevision(network))

	// A fleet that does not exist holds every member that is to move.
	lonely := dependingFleet("lonely", "network", "gone")
	waits, err = r.dependencyGate(t.Context(), lonely, members[:2], "l-1", "l-1")
	require.NoError(t, err)
	assert.Contains(t, waits.why["clusters-ready"], "fleet gone does not exist")
	assert.Equal(t, "fleet gone does not exist: every member that is to move waits", lonely.Status.Dependencies[1].Message)
	waits.countWaited(lonely, map[string]bool{"clusters-ready": true, "clusters-old": true})
	assert.Equal(t, int32(2), lonely.Status.Dependencies[1].Waiting)
	assert.Equal(t, int32(1), lonely.Status.Dependencies[0].Waiting, "network is Ready on clusters-ready")
}

// TestFleetTeardownWaitsForDependents: a fleet being deleted deletes its members except where a
// fleet that depends on it still has its member, and says which; two fleets on a cycle do not
// wait for each other; a member of a HostedCluster no longer selected waits the same way.
func TestFleetTeardownWaitsForDependents(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	network := dependingFleet("network")
	network.Finalizers = []string{v1alpha1.FinalizerName}
	network.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	monitoring := dependingFleet("monitoring", "network")
	r, c := f.stepsWith(t, nil, network, monitoring,
		depMember(network, "clusters-a", "n", true), depMember(network, "clusters-b", "n", true),
		depMember(monitoring, "clusters-a", "m", true))

	res, err := r.finalize(t.Context(), network)
	require.NoError(t, err)
	assert.False(t, res.IsZero(), "waits")
	err = c.Get(t.Context(), client.ObjectKey{Namespace: "clusters-b", Name: "network"}, &v1alpha1.Package{})
	assert.True(t, apierrors.IsNotFound(err), "no dependent member beside it: deleted (%v)", err)
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "clusters-a", Name: "network"}, &v1alpha1.Package{}), "kept while monitoring's member is there")
	assert.Contains(t, conditions.GetMessage(network, meta.ReadyCondition), "clusters-a waits for the member(s) of monitoring there to be torn down first")

	// monitoring's member goes: network's follows.
	require.NoError(t, c.Delete(t.Context(), depMember(monitoring, "clusters-a", "m", true)))
	_, err = r.finalize(t.Context(), network)
	require.NoError(t, err)
	err = c.Get(t.Context(), client.ObjectKey{Namespace: "clusters-a", Name: "network"}, &v1alpha1.Package{})
	assert.True(t, apierrors.IsNotFound(err), "deleted once the dependent's member is gone (%v)", err)

	t.Run("a cycle waits for nothing", func(t *testing.T) {
		t.Parallel()
		a, b := dependingFleet("a", "b"), dependingFleet("b", "a")
		a.Finalizers, a.DeletionTimestamp = []string{v1alpha1.FinalizerName}, &metav1.Time{Time: time.Now()}
		r, c := f.stepsWith(t, nil, a, b, depMember(a, "clusters-a", "x", true), depMember(b, "clusters-a", "y", true))
		_, err := r.finalize(t.Context(), a)
		require.NoError(t, err)
		err = c.Get(t.Context(), client.ObjectKey{Namespace: "clusters-a", Name: "a"}, &v1alpha1.Package{})
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	})
	t.Run("a cluster no longer selected", func(t *testing.T) {
		t.Parallel()
		network, monitoring := dependingFleet("network"), dependingFleet("monitoring", "network")
		stray := depMember(network, "clusters-a", "n", true)
		r, c := f.stepsWith(t, nil, network, monitoring, stray, depMember(monitoring, "clusters-a", "m", true))
		require.NoError(t, r.removeStrayMembers(t.Context(), network, nil, nil, []*v1alpha1.Package{stray}))
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(stray), &v1alpha1.Package{}), "kept while monitoring's member is there")
		assert.Equal(t, "Normal Deleting member of a HostedCluster no longer selected: clusters-a waits for the member(s) of monitoring there to be torn down first (their spec.dependsOn names this fleet)",
			<-r.recorder.(*record.FakeRecorder).Events)
	})
	t.Run("the wait ends ten minutes after the fleet's deletion", func(t *testing.T) {
		t.Parallel()
		network, monitoring := dependingFleet("network"), dependingFleet("monitoring", "network")
		network.Finalizers = []string{v1alpha1.FinalizerName}
		network.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(-reconciler.MaxDependentTeardownWait - time.Second)}
		r, c := f.stepsWith(t, nil, network, monitoring, depMember(network, "clusters-a", "n", true), depMember(monitoring, "clusters-a", "m", true))
		_, err := r.finalize(t.Context(), network)
		require.NoError(t, err)
		err = c.Get(t.Context(), client.ObjectKey{Namespace: "clusters-a", Name: "network"}, &v1alpha1.Package{})
		assert.True(t, apierrors.IsNotFound(err), "deleted at the deadline (%v)", err)
		assert.Equal(t, "Warning Deleting deleting the member in clusters-a although monitoring still keep(s) a member there: waited 10m0s after the fleet's deletion",
			<-r.recorder.(*record.FakeRecorder).Events)
	})
}
