package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// waitForFleetGeneration changes the fleet's spec (nothing its revision is made of) and waits
// until the fleet has reconciled that generation with Ready's reason: a reconcile that is not a
// reconcile request.
func waitForFleetGeneration(t *testing.T, fleet *v1alpha1.HostedClusterPackage, change func(*v1alpha1.HostedClusterPackage), reason string) *v1alpha1.HostedClusterPackage {
	t.Helper()
	updateFleet(t, fleet, change)
	generation := fleet.Generation
	got := &v1alpha1.HostedClusterPackage{}
	eventually(t, func(a *attempt) {
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), got)) {
			assert.GreaterOrEqual(a, got.Status.ObservedGeneration, generation)
			assert.Equal(a, reason, conditions.GetReason(got, meta.ReadyCondition), conditions.GetMessage(got, meta.ReadyCondition))
		}
	}, "fleet %s reconciles generation %d", fleet.Name, generation)
	return got
}

// TestFleetRollback rolls a broken digest out with spec.rollout.onFailure: Rollback: the canary
// that fails halts the rollout, the fleet rejects the digest (status.rejected) and returns the
// canaries to the stable revision; across several reconciles no member is moved to the
// rejected digest again; a reconcile request tries it once more (and rejects it again); a push
// of a fixed digest to the tag is rolled out.
func TestFleetRollback(t *testing.T) {
	t.Parallel()
	registry := suite.registry.Host
	hcNamespace := newNamespace(t)
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "canary", "canary", "prod", "prod", "prod", "prod")
	partitionOf := map[string]string{}
	for ns, hc := range clusters {
		partitionOf[ns] = hc.GetLabels()["rollout-wave"]
	}
	repo := "fleet-rollback/" + hcNamespace
	push := func(version string, broken bool) string {
		t.Helper()
		return pushPackageTo(t, writePackage(t, fleetPackage(version, broken)), registry+"/"+repo+":stable")
	}
	v1 := push("1", false)
	one := intstr.FromInt32(1)
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "rollback-" + hcNamespace[len(hcNamespace)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template: v1alpha1.PackageTemplate{
				Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
			},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable:   &one,
				Partitions:       &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "prod"}}},
				ProgressDeadline: &metav1.Duration{Duration: time.Minute},
				OnFailure:        v1alpha1.FleetFailureRollback,
			},
		},
	}
	w := watchFleet(t, fleet.Name, partitionOf)
	newFleet(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1)
	w.reset()

	// The broken digest halts in the canaries, is rejected, and the canaries return to v1.
	v2 := push("2", true)
	requestFleetReconcile(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.RolledBackReason, v2)
	assert.True(t, conditions.IsStalled(got))
	require.NotNil(t, got.Status.Rejected, "status.rejected")
	assert.Equal(t, v2, got.Status.Rejected.Digest)
	assert.Equal(t, got.Status.Target.Name, got.Status.Rejected.Name)
	assert.Equal(t, v1alpha1.RolloutHaltedReason, got.Status.Rejected.Reason)
	assert.Contains(t, got.Status.Rejected.Message, v1alpha1.RenderFailedReason)
	assert.Equal(t, v1, got.Status.Stable.Digest, "the stable revision stays")
	rejected := got.Status.Target.Name
	checkOnStable := func(a testingT) {
		for ns, m := range fleetMembers(a, t.Context(), fleet.Name) {
			assert.Contains(a, m.Spec.Image, "@"+v1, "%s (%s)", ns, partitionOf[ns])
		}
	}
	eventually(t, func(a *attempt) {
		checkOnStable(a)
		for ns, m := range fleetMembers(a, a.Context(), fleet.Name) {
			assert.True(a, conditions.IsReady(&m) && m.Status.ObservedGeneration == m.Generation, "%s Ready on v1", ns)
		}
	}, "the canaries are back on the stable revision, Ready")
	_, moves, states := w.snapshot()
	moved := moves[rejected]
	require.NotEmpty(t, moved, "a canary was moved to the broken digest")
	for _, ns := range moved {
		assert.Equal(t, "canary", partitionOf[ns], "only canaries reached the broken digest: %v", moved)
	}
	assert.Contains(t, states, "canary=RollingBack")
	eventually(t, func(a *attempt) {
		assert.Positive(a, fleetEvents(a, a.Context(), fleet.Name, "Warning", v1alpha1.RollingBackReason))
		assert.Positive(a, fleetEvents(a, a.Context(), fleet.Name, "Warning", v1alpha1.RolledBackReason))
	}, "a RollingBack and a RolledBack event")

	// Several reconciles that are not requests: the rejected digest is not tried again.
	for i := range 3 {
		got = waitForFleetGeneration(t, fleet, func(f *v1alpha1.HostedClusterPackage) {
			f.Spec.Rollout.Soak = &metav1.Duration{Duration: time.Duration(i+1) * time.Second}
		}, v1alpha1.RolledBackReason)
		assert.NotNil(t, got.Status.Rejected)
	}
	_, moves, _ = w.snapshot()
	assert.Len(t, moves[rejected], len(moved), "no member moved to the rejected digest again: %v", moves[rejected])
	checkOnStable(t)

	// A reconcile request tries the digest once more: a canary moves to it, fails, and it is
	// rejected again.
	requestFleetReconcile(t, fleet)
	eventually(t, func(a *attempt) {
		_, moves, _ := w.snapshot()
		assert.Greater(a, len(moves[rejected]), len(moved), "the request retries the digest")
	}, "a canary moves to the digest again")
	waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.RolledBackReason, v2)
	eventually(t, func(a *attempt) { checkOnStable(a) }, "back on the stable revision")

	// The tag moves to a fixed digest: it is rolled out, and the rejection is gone.
	v3 := push("3", false)
	requestFleetReconcile(t, fleet)
	got = waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v3)
	assert.Nil(t, got.Status.Rejected)
	assert.Equal(t, "6/6/6", got.Status.Progress)
}

// TestFleetWindows: while the fleet's only maintenance window is closed a new digest moves no
// member (no write to any member Package), and the status says when the window opens; with a
// window open, it is rolled out. The windows are chosen from the real time: one that opens in
// twelve hours for a minute is closed now, one that opens every minute for an hour is open.
func TestFleetWindows(t *testing.T) {
	t.Parallel()
	registry := suite.registry.Host
	hcNamespace := newNamespace(t)
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "canary", "prod", "prod")
	repo := "fleet-windows/" + hcNamespace
	push := func(version string) string {
		t.Helper()
		return pushPackageTo(t, writePackage(t, fleetPackage(version, false)), registry+"/"+repo+":stable")
	}
	opens := time.Now().UTC().Add(12 * time.Hour).Truncate(time.Minute)
	closed := v1alpha1.FleetWindow{Schedule: fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()), Duration: metav1.Duration{Duration: time.Minute}}
	v1 := push("1")
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-" + hcNamespace[len(hcNamespace)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template: v1alpha1.PackageTemplate{
				Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
			},
			Rollout: v1alpha1.FleetRolloutStrategy{
				Partitions: &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "prod"}}},
				Windows:    []v1alpha1.FleetWindow{closed},
			},
		},
	}
	newFleet(t, fleet)
	// The first install is not held by a closed window.
	got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1)
	assert.Equal(t, "3/3/3", got.Status.Progress)

	memberWrites := func() int {
		n := 0
		for ns := range clusters {
			path := "/apis/" + v1alpha1.GroupVersion.String() + "/namespaces/" + ns + "/packages/" + fleet.Name
			n += suite.requests.path(http.MethodPut, path) + suite.requests.path(http.MethodPatch, path)
		}
		return n
	}
	before := memberWrites()
	v2 := push("2")
	requestFleetReconcile(t, fleet)
	got = waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.RolloutProgressingReason, v2)
	// More reconciles, none a request: still nothing moves.
	for i := range 2 {
		got = waitForFleetGeneration(t, fleet, func(f *v1alpha1.HostedClusterPackage) {
			f.Spec.Rollout.Soak = &metav1.Duration{Duration: time.Duration(i+1) * time.Second}
		}, v1alpha1.RolloutProgressingReason)
	}
	assert.Zero(t, memberWrites()-before, "member Packages written while the window is closed")
	for ns, m := range fleetMembers(t, t.Context(), fleet.Name) {
		assert.Contains(t, m.Spec.Image, "@"+v1, ns)
	}
	assert.Equal(t, "canary", got.Status.CurrentPartition)
	require.NotNil(t, got.Status.Partitions[0].Window, "the partition's window in status")
	assert.False(t, got.Status.Partitions[0].Window.Open)
	if assert.NotNil(t, got.Status.Partitions[0].Window.OpensAt) {
		assert.Equal(t, opens, got.Status.Partitions[0].Window.OpensAt.UTC())
	}

	// An open window: the digest is rolled out.
	updateFleet(t, fleet, func(f *v1alpha1.HostedClusterPackage) {
		f.Spec.Rollout.Windows = []v1alpha1.FleetWindow{closed, {Schedule: "* * * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Berlin"}}
	})
	got = waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v2)
	assert.Equal(t, "3/3/3", got.Status.Progress)
	assert.Positive(t, memberWrites()-before)
	if w := got.Status.Partitions[0].Window; assert.NotNil(t, w) {
		assert.True(t, w.Open)
		assert.NotNil(t, w.ClosesAt)
	}
}
