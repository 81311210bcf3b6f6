package e2e

import (
	"os/exec"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// approvePartition approves revision for a fleet's partition with `pkgsync fleet approve`,
// as the platform team does.
func approvePartition(t *testing.T, fleet, partition, revision string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), crashBinary(t), "fleet", "approve", fleet, "--partition", partition, "--revision", revision,
		"--kubeconfig", suite.mgmt.KubeconfigPath)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "pkgsync fleet approve: %s", out)
	assert.Contains(t, string(out), "hostedclusterpackage.pkgsync.dev/"+fleet+" approved: partition "+partition+", revision "+revision)
}

// TestFleetApproval rolls two revisions out to a canary and a prod partition, prod needing
// approval: each revision stops after canary (AwaitingApproval, an event, no prod member moved)
// until an approval names it; an approval of another revision does nothing; the approval is
// consumed once its revision is rolled out.
func TestFleetApproval(t *testing.T) {
	t.Parallel()
	registry := suite.registry.Host
	hcNamespace := newNamespace(t)
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "canary", "prod", "prod")
	repo := "fleet/" + hcNamespace
	push := func(version string) string {
		t.Helper()
		return pushPackageTo(t, writePackage(t, fleetPackage(version, false)), registry+"/"+repo+":stable")
	}
	v1 := push("1")
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "approve-" + hcNamespace[len(hcNamespace)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}}},
			Rollout: v1alpha1.FleetRolloutStrategy{
				Partitions:       &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "prod"}}},
				ApprovalRequired: []string{"prod"},
			},
		},
	}
	newFleet(t, fleet)

	awaiting := func(digest string) *v1alpha1.HostedClusterPackage {
		t.Helper()
		got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.AwaitingApprovalReason, digest)
		assert.Equal(t, "prod", got.Status.CurrentPartition)
		if assert.Len(t, got.Status.Partitions, 2) {
			assert.Equal(t, v1alpha1.PartitionComplete, got.Status.Partitions[0].State)
			assert.Equal(t, v1alpha1.PartitionAwaitingApproval, got.Status.Partitions[1].State)
		}
		return got
	}
	// The first revision: canary gets it, prod waits, with an event saying so.
	got := awaiting(v1)
	members := fleetMembers(t, t.Context(), fleet.Name)
	assert.Len(t, members, 1, "only canary has a member before the approval")
	eventually(t, func(a *attempt) {
		assert.Positive(a, fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeNormal, v1alpha1.AwaitingApprovalReason))
	})

	// An approval of another revision does nothing, whatever the fleet looks at.
	approvePartition(t, fleet.Name, "prod", "000000000000-00000000")
	requestFleetReconcile(t, got)
	token := got.Annotations[meta.ReconcileRequestAnnotation]
	eventually(t, func(a *attempt) {
		f := &v1alpha1.HostedClusterPackage{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), f)) {
			assert.Equal(a, token, f.Status.LastHandledReconcileAt)
		}
	})
	awaiting(v1)
	assert.Len(t, fleetMembers(t, t.Context(), fleet.Name), 1)

	// The approval of the target lets prod start; it is consumed once the revision is out.
	approvePartition(t, fleet.Name, "prod", got.Status.Target.Name)
	done := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1)
	assert.Len(t, fleetMembers(t, t.Context(), fleet.Name), len(clusters))
	eventually(t, func(a *attempt) {
		assert.Positive(a, fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeNormal, v1alpha1.ApprovalGivenReason))
		f := &v1alpha1.HostedClusterPackage{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), f)) {
			assert.NotContains(a, f.Annotations, v1alpha1.ApprovePartitionPrefix+"prod", "the approval is consumed")
		}
	})

	// The next revision waits again: prod stays on v1.
	v2 := push("2")
	requestFleetReconcile(t, done)
	awaiting(v2)
	for ns, m := range fleetMembers(t, t.Context(), fleet.Name) {
		if clusters[ns].GetLabels()["rollout-wave"] == "prod" {
			assert.Contains(t, m.Spec.Image, v1, ns)
		} else {
			assert.Contains(t, m.Spec.Image, v2, ns)
		}
	}
}
