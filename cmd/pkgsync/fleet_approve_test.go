package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestFleetApproveCommand: fleet approve writes the approval of the target for a gated partition
// and nothing else; it writes nothing for a partition approved already, in a dry run, or for a
// partition that needs no approval; fleet status shows the approvals.
func TestFleetApproveCommand(t *testing.T) {
	t.Parallel()
	cp, c := fleetControlPlane(t, "fleet-approve")

	now := metav1.Now()
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Spec: v1alpha1.HostedClusterPackageSpec{
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: "registry.example.com/addons/hosted-addon:v2"}},
			Rollout: v1alpha1.FleetRolloutStrategy{
				Partitions:       &v1alpha1.FleetPartitions{LabelKey: "wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "prod", "late"}}},
				ApprovalRequired: []string{"prod", "late"},
			},
		},
	}
	require.NoError(t, c.Create(t.Context(), fleet))
	t.Cleanup(func() { _ = c.Delete(t.Context(), fleet) })
	target := "bbbbbbbbbbbb-22222222"
	fleet.Status = v1alpha1.HostedClusterPackageStatus{
		Target: &v1alpha1.FleetRevision{Name: target, Image: "registry.example.com/addons/hosted-addon:v2@sha256:" + strings.Repeat("b", 64),
			Digest: "sha256:" + strings.Repeat("b", 64), TemplateDigest: "sha256:" + strings.Repeat("2", 64)},
		Partitions: []v1alpha1.PartitionStatus{
			{Name: "canary", State: v1alpha1.PartitionComplete, LastTransitionTime: now},
			{Name: "prod", State: v1alpha1.PartitionAwaitingApproval, LastTransitionTime: now},
			{Name: "late", State: v1alpha1.PartitionPending, LastTransitionTime: now},
		},
	}
	require.NoError(t, c.Status().Update(t.Context(), fleet))
	kubeconfig := []string{"--kubeconfig", cp.KubeconfigPath}
	approval := func() (string, string) {
		got := &v1alpha1.HostedClusterPackage{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Name: "gated"}, got))
		return got.Annotations[v1alpha1.ApprovePartitionPrefix+"prod"], got.ResourceVersion
	}

	stdout, _, err := runCLI(t, append([]string{"fleet", "status", "gated", "-o", "json"}, kubeconfig...)...)
	require.NoError(t, err)
	var status fleetStatusOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &status))
	assert.Equal(t, []fleetApprovalOutput{{Partition: "prod", State: "AwaitingApproval"}, {Partition: "late", State: "NotApproved"}}, status.Approvals)
	stdout, _, err = runCLI(t, append([]string{"fleet", "status", "gated"}, kubeconfig...)...)
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^prod +AwaitingApproval +- +pkgsync fleet approve gated --partition prod$`, stdout)

	for _, mode := range []string{"client", "server"} {
		stdout, _, err = runCLI(t, append([]string{"fleet", "approve", "gated", "--partition", "prod", "--dry-run=" + mode}, kubeconfig...)...)
		require.NoError(t, err, mode)
		assert.Contains(t, stdout, "approved: partition prod, revision "+target+" (", mode)
		got, _ := approval()
		assert.Empty(t, got, "a %s dry run writes nothing", mode)
	}

	stdout, stderr, err := runCLI(t, append([]string{"fleet", "approve", "gated", "--partition", "prod"}, kubeconfig...)...)
	require.NoError(t, err)
	assert.Empty(t, stderr)
	assert.Equal(t, "hostedclusterpackage.pkgsync.dev/gated approved: partition prod, revision "+target+"\n", stdout)
	got, rv := approval()
	assert.Equal(t, target, got)

	stdout, _, err = runCLI(t, append([]string{"fleet", "approve", "gated", "--partition", "prod", "-o", "json"}, kubeconfig...)...)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"gated","partition":"prod","revision":"`+target+`","target":"`+target+`","changed":false,"dryRun":"none"}`, stdout)
	_, again := approval()
	assert.Equal(t, rv, again, "approving an approved partition writes nothing")

	stdout, _, err = runCLI(t, append([]string{"fleet", "status", "gated"}, kubeconfig...)...)
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^prod +Approved +`+target+` +-$`, stdout)

	_, stderr, err = runCLI(t, append([]string{"fleet", "approve", "gated", "--partition", "late", "--revision", "cccccccccccc-33333333"}, kubeconfig...)...)
	require.NoError(t, err)
	assert.Contains(t, stderr, "Warning: revision cccccccccccc-33333333 is not the fleet's target ("+target+"): the approval waits until it is")

	_, _, err = runCLI(t, append([]string{"fleet", "approve", "gated", "--partition", "canary"}, kubeconfig...)...)
	assert.ErrorContains(t, err, `partition "canary" of HostedClusterPackage gated needs no approval: its spec.rollout.approvalRequired lists prod, late`)
	assert.Equal(t, 1, exitCodeOf(err))

	_, _, err = runCLI(t, append([]string{"fleet", "approve", "missing", "--partition", "prod"}, kubeconfig...)...)
	assert.ErrorContains(t, err, `HostedClusterPackage "missing" not found`)

	for _, args := range [][]string{
		{"fleet", "approve", "gated"},
		{"fleet", "approve", "gated", "--partition", "prod", "--revision", "latest"},
		{"fleet", "approve", "gated", "--partition", "prod", "--dry-run=maybe"},
		{"fleet", "approve", "--partition", "prod"},
	} {
		_, _, err = runCLI(t, append(args, kubeconfig...)...)
		assert.Equal(t, 2, exitCodeOf(err), "%v: %v", args, err)
	}
}
