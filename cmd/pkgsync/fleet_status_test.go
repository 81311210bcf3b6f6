package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/testenv"
)

// haltedFleet is a fleet whose rollout halted in its canary partition; its status is written
// as the controller would, with times relative to now that print the same for a few minutes.
func haltedFleet(now time.Time) (*v1alpha1.HostedClusterPackage, v1alpha1.HostedClusterPackageStatus) {
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "hosted-addon"},
		Spec: v1alpha1.HostedClusterPackageSpec{
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: "registry.example.com/addons/hosted-addon:v2"}},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable:   &intstr.IntOrString{Type: intstr.String, StrVal: "10%"},
				FailureThreshold: &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
				Partitions: &v1alpha1.FleetPartitions{LabelKey: "rollout.example.com/wave",
					Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "*"}}},
			},
		},
	}
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d).Truncate(time.Second).UTC()) }
	target := v1alpha1.FleetRevision{
		Name:           "bbbbbbbbbbbb-22222222",
		Image:          "registry.example.com/addons/hosted-addon:v2@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		Digest:         "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		TemplateDigest: "sha256:2222222222222222222222222222222222222222222222222222222222222222",
		Version:        "2.0.0",
	}
	stable := v1alpha1.FleetRevision{
		Name:           "aaaaaaaaaaaa-11111111",
		Image:          "registry.example.com/addons/hosted-addon:v1@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		Digest:         "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		TemplateDigest: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
	}
	halt := "rollout of bbbbbbbbbbbb-22222222 halted in partition canary: 1 member(s) failed (spec.rollout.failureThreshold): " +
		"clusters-c2: RenderFailed: render: template config.yaml.gotmpl: this revision is broken on purpose"
	status := v1alpha1.HostedClusterPackageStatus{
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "RolloutHalted", Message: halt, LastTransitionTime: ago(10*time.Hour + 30*time.Minute)},
			{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "RolloutHalted", Message: halt, LastTransitionTime: ago(10*time.Hour + 30*time.Minute)},
		},
		Target:            &target,
		TargetAppliedFrom: []string{"mirror.example.com/addons/hosted-addon"},
		Stable: &v1alpha1.FleetStableRevision{FleetRevision: stable,
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: "registry.example.com/addons/hosted-addon:v1"}}},
		MemberCounts:     v1alpha1.MemberCounts{Total: 8, Updated: 3, Ready: 5, Failed: 1, Blocked: 1, Held: 1},
		Progress:         "3/5/8",
		CurrentPartition: "canary",
		Partitions: []v1alpha1.PartitionStatus{
			{Name: "canary", State: v1alpha1.PartitionHalted, MemberCounts: v1alpha1.MemberCounts{Total: 3, Updated: 3, Ready: 1, Failed: 1}, LastTransitionTime: ago(10*time.Hour + 30*time.Minute)},
			{Name: "prod", State: v1alpha1.PartitionPending, MemberCounts: v1alpha1.MemberCounts{Total: 4, Ready: 3, Blocked: 1, Held: 1}, LastTransitionTime: ago(3*24*time.Hour + 2*time.Hour + 30*time.Minute)},
			{Name: "", State: v1alpha1.PartitionPending, MemberCounts: v1alpha1.MemberCounts{Total: 1, Ready: 1}, LastTransitionTime: ago(3*24*time.Hour + 2*time.Hour + 30*time.Minute)},
		},
		InProgress: []v1alpha1.MemberStatus{
			{Namespace: "clusters-c3", Partition: "canary", Reason: "PhaseProgressing", Message: "phase deploy: Deployment.apps clusters-c3/addon-operator: Available=False"},
		},
		FailedMembers: []v1alpha1.MemberStatus{
			{Namespace: "clusters-c2", Partition: "canary", Reason: "RenderFailed", Message: "render: template config.yaml.gotmpl: this revision is broken on purpose"},
			// A message carries text from a package: a terminal escape, a line break and a
			// right-to-left override must neither act on the terminal nor break the table.
			{Namespace: "clusters-c9", Reason: "Collision", Message: "Package clusters-c9/hosted-addon exists\x1b[2J\nand is \u202enot this fleet's"},
		},
		BlockedMembers: []v1alpha1.MemberStatus{
			{Namespace: "clusters-p3", Partition: "prod", Reason: "HostedClusterUnavailable", Message: "HostedCluster clusters/p3 is not Available: etcd quorum lost"},
		},
		HeldMembers: []v1alpha1.MemberStatus{
			{Namespace: "clusters-p4", Partition: "prod", Reason: "Held", Message: "pkgsync.dev/hold on the HostedCluster: tenant change freeze until Friday"},
		},
	}
	return fleet, status
}

// TestFleetStatusCommand runs `pkgsync fleet status` against a real API server with the
// HostedClusterPackage CRD, on fleets whose status is written as the controller writes it.
// fleetControlPlane starts an API server with the HostedClusterPackage CRD and returns it with
// a client of the pkgsync API, for the fleet commands' tests.
func fleetControlPlane(t *testing.T, name string) (*testenv.ControlPlane, client.Client) {
	t.Helper()
	cp := testenv.NewControlPlane(t, name)
	_, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "config", "crd", "bases", "pkgsync.dev_hostedclusterpackages.yaml")},
	})
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return cp, c
}

func TestFleetStatusCommand(t *testing.T) {
	t.Parallel()
	cp, c := fleetControlPlane(t, "fleet-status")

	now := time.Now()
	fleet, status := haltedFleet(now)
	require.NoError(t, c.Create(t.Context(), fleet))
	t.Cleanup(func() { _ = c.Delete(t.Context(), fleet) })
	fleet.Status = status
	fleet.Status.ObservedGeneration = fleet.Generation
	require.NoError(t, c.Status().Update(t.Context(), fleet))

	fresh := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "fresh"},
		Spec: v1alpha1.HostedClusterPackageSpec{
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: "registry.example.com/addons/other:v1"}},
			Rollout:  v1alpha1.FleetRolloutStrategy{Paused: true},
		},
	}
	require.NoError(t, c.Create(t.Context(), fresh))
	t.Cleanup(func() { _ = c.Delete(t.Context(), fresh) })

	rolledBack := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "rolled-back"}, Spec: *fleet.Spec.DeepCopy()}
	rolledBack.Spec.Rollout.OnFailure = v1alpha1.FleetFailureRollback
	rolledBack.Spec.Rollout.Windows = []v1alpha1.FleetWindow{{Schedule: "0 22 * * *", Duration: metav1.Duration{Duration: time.Hour}, Partitions: []string{"prod"}}}
	maxRate := "0.05"
	rolledBack.Spec.Rollout.Analysis = &v1alpha1.FleetAnalysis{Checks: []v1alpha1.FleetCheck{
		{Name: "error-rate", Query: &v1alpha1.FleetMetricQuery{PromQL: "sum by (namespace) (rate(errors[5m]))", Max: &maxRate}}}}
	require.NoError(t, c.Create(t.Context(), rolledBack))
	t.Cleanup(func() { _ = c.Delete(t.Context(), rolledBack) })
	opens := now.Add(5*time.Hour + 30*time.Minute).UTC().Truncate(time.Second)
	rolledBack.Status = *status.DeepCopy()
	// A version that is not fit to show (a member's status may say anything the schema allows)
	// is not shown.
	hostile := *status.Target
	hostile.Version = "2.0.0\x1b[2J\x1b[H"
	rolledBack.Status.Rejected = &v1alpha1.FleetRejectedRevision{FleetRevision: hostile, Reason: "RolloutHalted",
		Message: "1 member(s) failed", RejectedAt: metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second))}
	rolledBack.Status.Partitions = []v1alpha1.PartitionStatus{
		{Name: "canary", State: v1alpha1.PartitionRolledBack, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))},
		{Name: "prod", State: v1alpha1.PartitionRolledBack, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
			Window: &v1alpha1.FleetWindowStatus{OpensAt: &metav1.Time{Time: opens}}},
	}
	rolledBack.Status.Analysis = []v1alpha1.FleetCheckStatus{{Name: "error-rate", Partition: "canary", Revision: hostile.Name, Result: v1alpha1.FleetCheckFailed,
		Value: "0.3", Message: "1 member(s) failed: clusters-c2: value 0.3 outside [-Inf, 0.05]", EvaluatedAt: metav1.NewTime(now.Add(-2 * time.Minute).Truncate(time.Second)),
		Since: metav1.NewTime(now.Add(-3 * time.Minute).Truncate(time.Second))}}
	require.NoError(t, c.Status().Update(t.Context(), rolledBack))

	// A fleet ordered after two others: one Ready on its revision but not on every cluster, one
	// that does not exist, and one the controller has not read yet (the spec is newer).
	monitoring := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}, Spec: *fresh.Spec.DeepCopy()}
	monitoring.Spec.Rollout.Paused = false
	monitoring.Spec.DependsOn = []v1alpha1.FleetDependency{{Name: "network"}, {Name: "dns"}, {Name: "storage"}}
	require.NoError(t, c.Create(t.Context(), monitoring))
	t.Cleanup(func() { _ = c.Delete(t.Context(), monitoring) })
	waits := "waiting for the fleets spec.dependsOn names: fleet network: its member here is not Ready on revision nnnnnnnnnnnn-33333333 yet (PhaseProgressing); fleet dns does not exist"
	monitoring.Status = v1alpha1.HostedClusterPackageStatus{
		MemberCounts:   v1alpha1.MemberCounts{Total: 3, Updated: 2, Ready: 2, Blocked: 1},
		BlockedMembers: []v1alpha1.MemberStatus{{Namespace: "clusters-b", Reason: v1alpha1.DependencyNotReadyReason, Message: waits}},
		Dependencies: []v1alpha1.FleetDependencyStatus{{Name: "network", Revision: "nnnnnnnnnnnn-33333333", Waiting: 1},
			{Name: "dns", Waiting: 3, Message: "fleet dns does not exist: every member that is to move waits"}},
	}
	require.NoError(t, c.Status().Update(t.Context(), monitoring))

	t.Run("dependencies and the members waiting for them", func(t *testing.T) {
		t.Parallel()
		stdout, _, err := runCLI(t, "fleet", "status", "monitoring", "--kubeconfig", cp.KubeconfigPath)
		require.NoError(t, err)
		assert.Regexp(t, `Depends on \(spec.dependsOn: .*\):\nFLEET +REVISION +WAITING +MESSAGE\n`+
			`network +nnnnnnnnnnnn-33333333 +1 +-\n`+
			`dns +- +3 +fleet dns does not exist: every member that is to move waits\n`+
			`storage +- +0 +-\n`, stdout)
		assert.Regexp(t, `Blocked members:\nNAMESPACE +PARTITION +REASON +MESSAGE\nclusters-b +\(all\) +DependencyNotReady +waiting for the fleets spec.dependsOn names: fleet network`, stdout)
		stdout, _, err = runCLI(t, "fleet", "status", "monitoring", "--kubeconfig", cp.KubeconfigPath, "-o", "json")
		require.NoError(t, err)
		var doc struct{ DependsOn []fleetDependencyOutput }
		require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
		assert.Equal(t, []fleetDependencyOutput{{Name: "network", Revision: "nnnnnnnnnnnn-33333333", Waiting: 1},
			{Name: "dns", Waiting: 3, Message: "fleet dns does not exist: every member that is to move waits"}, {Name: "storage"}}, doc.DependsOn)
	})

	// A fleet whose rollout is done but for members waiting for their HostedCluster's
	// maintenance windows, one of them because its annotation cannot be read.
	frozen := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Spec: *fleet.Spec.DeepCopy()}
	require.NoError(t, c.Create(t.Context(), frozen))
	t.Cleanup(func() { _ = c.Delete(t.Context(), frozen) })
	frozenOpens := now.Add(2*24*time.Hour + 9*time.Hour + 30*time.Minute).UTC().Truncate(time.Second)
	frozen.Status = v1alpha1.HostedClusterPackageStatus{
		Target: status.Target, Stable: status.Stable.DeepCopy(),
		MemberCounts: v1alpha1.MemberCounts{Total: 8, Updated: 6, Ready: 8, WindowHeld: 2}, Progress: "6/8/8",
		Partitions: []v1alpha1.PartitionStatus{
			{Name: "canary", State: v1alpha1.PartitionComplete, MemberCounts: v1alpha1.MemberCounts{Total: 3, Updated: 3, Ready: 3}, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))},
			{Name: "prod", State: v1alpha1.PartitionComplete, MemberCounts: v1alpha1.MemberCounts{Total: 5, Updated: 3, Ready: 5, WindowHeld: 2}, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))},
		},
		WindowHeldMembers: []v1alpha1.WindowHeldMemberStatus{
			{MemberStatus: v1alpha1.MemberStatus{Namespace: "clusters-us-3", Partition: "prod", Reason: v1alpha1.OutsideClusterWindowReason,
				Message: "HostedCluster clusters/us-3: none of its maintenance windows (pkgsync.dev/maintenance-windows) is open; the member moves to another revision once one opens, at " + frozenOpens.Format(time.RFC3339)},
				OpensAt: &metav1.Time{Time: frozenOpens}},
			{MemberStatus: v1alpha1.MemberStatus{Namespace: "clusters-us-4", Partition: "prod", Reason: v1alpha1.InvalidClusterWindowsReason,
				Message: "HostedCluster clusters/us-4: its annotation pkgsync.dev/maintenance-windows cannot be read, so the member moves to no other revision until it is fixed: ..."}},
		},
	}
	require.NoError(t, c.Status().Update(t.Context(), frozen))

	t.Run("members waiting for their cluster's maintenance window", func(t *testing.T) {
		t.Parallel()
		stdout, _, err := runCLI(t, "fleet", "status", "frozen", "--kubeconfig", cp.KubeconfigPath)
		require.NoError(t, err)
		assert.Regexp(t, `Members: +6 updated, 8 ready, 0 failed, 0 blocked, 0 held, 2 waiting for their cluster's window, 8 total\n`, stdout)
		assert.Regexp(t, `NAME +STATE +UPDATED +READY +FAILED +BLOCKED +HELD +WINDOW-HELD +TOTAL +SINCE\ncanary +Complete +3 +3 +0 +0 +0 +0 +3 .*\nprod +Complete +3 +5 +0 +0 +0 +2 +5 `, stdout)
		assert.Regexp(t, `Waiting for their cluster's maintenance window \(pkgsync.dev/maintenance-windows\):
NAMESPACE +PARTITION +REASON +OPENS +MESSAGE
clusters-us-3 +prod +OutsideClusterWindow +`+regexp.QuoteMeta(frozenOpens.Format(time.RFC3339))+` \(in 2d9h\) +HostedCluster clusters/us-3: none of its maintenance windows .*
clusters-us-4 +prod +InvalidClusterWindows +- +HostedCluster clusters/us-4: its annotation pkgsync.dev/maintenance-windows cannot be read`, stdout)

		stdout, _, err = runCLI(t, "fleet", "status", "frozen", "--kubeconfig", cp.KubeconfigPath, "-o", "json")
		require.NoError(t, err)
		var doc struct {
			Members    map[string]int32
			WindowHeld []map[string]string
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
		assert.Equal(t, int32(2), doc.Members["windowHeld"])
		if assert.Len(t, doc.WindowHeld, 2) {
			assert.Equal(t, map[string]string{"namespace": "clusters-us-3", "partition": "prod", "reason": "OutsideClusterWindow",
				"message": frozen.Status.WindowHeldMembers[0].Message, "opensAt": frozenOpens.Format(time.RFC3339)}, doc.WindowHeld[0])
			assert.Equal(t, "", doc.WindowHeld[1]["opensAt"])
			assert.Equal(t, "InvalidClusterWindows", doc.WindowHeld[1]["reason"])
		}
	})

	t.Run("table", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := runCLI(t, "fleet", "status", "hosted-addon", "--kubeconfig", cp.KubeconfigPath)
		require.NoError(t, err)
		assert.Empty(t, stderr)
		assertGolden(t, filepath.Join("testdata", "fleet-status-halted.golden"), stdout)
	})

	t.Run("table of a fleet the controller has not reported on", func(t *testing.T) {
		t.Parallel()
		stdout, _, err := runCLI(t, "fleet", "status", "fresh", "--kubeconfig", cp.KubeconfigPath)
		require.NoError(t, err)
		assertGolden(t, filepath.Join("testdata", "fleet-status-fresh.golden"), stdout)
	})

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		stdout, _, err := runCLI(t, "fleet", "status", "hosted-addon", "--kubeconfig", cp.KubeconfigPath, "-o", "json")
		require.NoError(t, err)
		at := func(d time.Duration) string { return now.Add(-d).Truncate(time.Second).UTC().Format(time.RFC3339) }
		assert.JSONEq(t, fmt.Sprintf(`{
  "name": "hosted-addon", "generation": 1, "observedGeneration": 1, "suspended": false, "paused": false,
  "target": {"name": "bbbbbbbbbbbb-22222222", "image": "registry.example.com/addons/hosted-addon:v2@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    "digest": "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "version": "2.0.0", "templateDigest": "sha256:2222222222222222222222222222222222222222222222222222222222222222"},
  "stable": {"name": "aaaaaaaaaaaa-11111111", "image": "registry.example.com/addons/hosted-addon:v1@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "version": "", "templateDigest": "sha256:1111111111111111111111111111111111111111111111111111111111111111"},
  "targetAppliedFrom": ["mirror.example.com/addons/hosted-addon"],
  "rejected": null,
  "ready": {"status": "False", "reason": "RolloutHalted", "since": %[1]q,
    "message": "rollout of bbbbbbbbbbbb-22222222 halted in partition canary: 1 member(s) failed (spec.rollout.failureThreshold): clusters-c2: RenderFailed: render: template config.yaml.gotmpl: this revision is broken on purpose"},
  "currentPartition": "canary",
  "members": {"updated": 3, "ready": 5, "failed": 1, "blocked": 1, "held": 1, "windowHeld": 0, "total": 8},
  "partitions": [
    {"name": "canary", "state": "Halted", "updated": 3, "ready": 1, "failed": 1, "blocked": 0, "held": 0, "windowHeld": 0, "total": 3, "since": %[1]q, "window": null},
    {"name": "prod", "state": "Pending", "updated": 0, "ready": 3, "failed": 0, "blocked": 1, "held": 1, "windowHeld": 0, "total": 4, "since": %[2]q, "window": null},
    {"name": "", "state": "Pending", "updated": 0, "ready": 1, "failed": 0, "blocked": 0, "held": 0, "windowHeld": 0, "total": 1, "since": %[2]q, "window": null}
  ],
  "inProgress": [
    {"namespace": "clusters-c3", "partition": "canary", "reason": "PhaseProgressing", "message": "phase deploy: Deployment.apps clusters-c3/addon-operator: Available=False"}
  ],
  "failed": [
    {"namespace": "clusters-c2", "partition": "canary", "reason": "RenderFailed", "message": "render: template config.yaml.gotmpl: this revision is broken on purpose"},
    {"namespace": "clusters-c9", "partition": "", "reason": "Collision", "message": "Package clusters-c9/hosted-addon exists\u001b[2J\nand is \u202enot this fleet's"}
  ],
  "blocked": [
    {"namespace": "clusters-p3", "partition": "prod", "reason": "HostedClusterUnavailable", "message": "HostedCluster clusters/p3 is not Available: etcd quorum lost"}
  ],
  "held": [
    {"namespace": "clusters-p4", "partition": "prod", "reason": "Held", "message": "pkgsync.dev/hold on the HostedCluster: tenant change freeze until Friday"}
  ],
  "windowHeld": [],
  "analysis": [],
  "approvals": [],
  "dependsOn": []
}`, at(10*time.Hour+30*time.Minute), at(3*24*time.Hour+2*time.Hour+30*time.Minute)), stdout)
	})

	t.Run("json of a fleet without status has empty lists, not null", func(t *testing.T) {
		t.Parallel()
		stdout, _, err := runCLI(t, "fleet", "status", "fresh", "--kubeconfig", cp.KubeconfigPath, "-o", "json")
		require.NoError(t, err)
		assert.JSONEq(t, `{"name": "fresh", "generation": 1, "observedGeneration": -1, "suspended": false, "paused": true,
  "target": null, "targetAppliedFrom": [], "stable": null, "rejected": null, "ready": null, "currentPartition": "",
  "members": {"updated": 0, "ready": 0, "failed": 0, "blocked": 0, "held": 0, "windowHeld": 0, "total": 0},
  "partitions": [], "inProgress": [], "failed": [], "blocked": [], "held": [], "windowHeld": [], "analysis": [], "approvals": [], "dependsOn": []}`, stdout)
	})

	t.Run("a rejected revision and maintenance windows", func(t *testing.T) {
		t.Parallel()
		stdout, _, err := runCLI(t, "fleet", "status", "rolled-back", "--kubeconfig", cp.KubeconfigPath)
		require.NoError(t, err)
		assert.Contains(t, stdout, "Target:    2.0.0 (sha256:bbbbbbbb…)  bbbbbbbbbbbb-22222222  registry.example.com/addons/hosted-addon:v2@sha256:bbbb")
		assert.Contains(t, stdout, "Rejected:  sha256:bbbbbbbb…  bbbbbbbbbbbb-22222222, ")
		assert.NotContains(t, stdout, "\x1b")
		assert.Contains(t, stdout, "RolloutHalted: 1 member(s) failed (not rolled out again until the tag moves to another digest or a reconcile is requested)")
		assert.Contains(t, stdout, "WINDOW")
		assert.Regexp(t, `canary +RolledBack .* any time\n`, stdout)
		assert.Regexp(t, `prod +RolledBack .* closed, opens `+regexp.QuoteMeta(opens.Format(time.RFC3339))+` \(in 5h`, stdout)
		// Evaluated two minutes before the test's start; a loaded machine may take a minute or
		// more to get here (CI saw 3m25s).
		assert.Regexp(t, `Analysis:\nCHECK +PARTITION +RESULT +VALUE +EVALUATED +MESSAGE\nerror-rate +canary +Failed +0\.3 +[2-9]m\d*s? ago +1 member\(s\) failed: clusters-c2: value 0\.3 outside`, stdout)
		stdout, _, err = runCLI(t, "fleet", "status", "rolled-back", "--kubeconfig", cp.KubeconfigPath, "-o", "json")
		require.NoError(t, err)
		var doc struct {
			Rejected   map[string]any
			Partitions []struct{ Window map[string]any }
			Analysis   []map[string]string
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
		assert.Equal(t, "sha256:"+strings.Repeat("b", 64), doc.Rejected["digest"])
		assert.Equal(t, "RolloutHalted", doc.Rejected["reason"])
		assert.Equal(t, "", doc.Rejected["version"], "not fit to show")
		assert.Nil(t, doc.Partitions[0].Window)
		assert.Equal(t, map[string]any{"open": false, "opensAt": opens.Format(time.RFC3339)}, doc.Partitions[1].Window)
		if assert.Len(t, doc.Analysis, 1) {
			assert.Equal(t, map[string]string{"name": "error-rate", "partition": "canary", "revision": "bbbbbbbbbbbb-22222222", "result": "Failed", "value": "0.3",
				"message": "1 member(s) failed: clusters-c2: value 0.3 outside [-Inf, 0.05]", "evaluatedAt": now.Add(-2 * time.Minute).Truncate(time.Second).UTC().Format(time.RFC3339)}, doc.Analysis[0])
		}
	})

	t.Run("a fleet that does not exist is an error", func(t *testing.T) {
		t.Parallel()
		stdout, _, err := runCLI(t, "fleet", "status", "missing", "--kubeconfig", cp.KubeconfigPath)
		require.Error(t, err)
		assert.Empty(t, stdout)
		assert.Equal(t, fmt.Sprintf(`HostedClusterPackage "missing" not found on %s: kubectl get hostedclusterpackages lists the fleets`, cp.Config.Host), err.Error())
		assert.Equal(t, 1, run([]string{"fleet", "status", "missing", "--kubeconfig", cp.KubeconfigPath}, io.Discard, io.Discard), "exit code")
	})

	t.Run("usage errors exit 2", func(t *testing.T) {
		t.Parallel()
		assert.Equal(t, 2, run([]string{"fleet", "status", "hosted-addon", "--kubeconfig", cp.KubeconfigPath, "-o", "wide"}, io.Discard, io.Discard))
		assert.Equal(t, 2, run([]string{"fleet", "status", "--kubeconfig", cp.KubeconfigPath}, io.Discard, io.Discard))
	})
}

// A revision reads as its version beside the start of its digest; a version from the status
// that is not fit to show is left out, and a digest is never printed as it came.
func TestVersionText(t *testing.T) {
	t.Parallel()
	digest := "sha256:3f9c0e1a7b2d" + strings.Repeat("0", 52)
	for _, tc := range []struct{ version, digest, want string }{
		{"1.4.2", digest, "1.4.2 (sha256:3f9c0e1a…)"},
		{"", digest, "sha256:3f9c0e1a…"},
		{"1.4.2\x1b[2J", digest, "sha256:3f9c0e1a…"},
		{"1.4.2\nReady: True", digest, "sha256:3f9c0e1a…"},
		{strings.Repeat("1", 129), digest, "sha256:3f9c0e1a…"},
		{"1.4.2", "", "1.4.2"},
		{"", "", ""},
		{"1.4.2", "sha256:3f9c", "1.4.2 (sha256:3f9c)"},
		{"", "sha256:\x1b[2J\x1b[2J\x1b[2J", "sha256:\\u001b[2J\\u001b[2J…"},
	} {
		assert.Equal(t, tc.want, versionText(tc.version, tc.digest), "%q %q", tc.version, tc.digest)
	}
}
