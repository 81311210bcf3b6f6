package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// fleetHostedPackage is version v of a package with a management phase (a ConfigMap showing the
// version) and a hosted-cluster phase (a ConfigMap of the member's own name in the hosted
// cluster's namespace default): a member whose HostedCluster is not Available or is paused
// applies the first and waits on the second, reporting HostedClusterUnavailable.
func fleetHostedPackage(version string) map[string]string {
	return map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: fleet-hosted-app
spec:
  phases:
  - name: config
  - name: hosted
    class: hosted-cluster
`,
		"config.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-app
  annotations:
    pkgsync.dev/phase: config
data:
  version: "` + version + `"
`,
		"hosted.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-{{ .environment.hyperShift.hostedCluster.hostedClusterNamespace }}
  namespace: default
  annotations:
    pkgsync.dev/phase: hosted
data:
  version: "` + version + `"
`,
	}
}

// holdHostedCluster sets (reason non-nil) or removes the pkgsync.dev/hold annotation of a
// HostedCluster with a merge patch.
func holdHostedCluster(t *testing.T, hc *unstructured.Unstructured, reason *string) {
	t.Helper()
	value := "null"
	if reason != nil {
		value = fmt.Sprintf("%q", *reason)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, v1alpha1.HoldAnnotation, value))
	require.NoError(t, suite.mgmtClient.Patch(t.Context(), hc, client.RawPatch(types.MergePatchType, patch)))
}

// TestFleetBlockedAndHeld rolls a new digest out to 12 HostedClusters in three partitions of
// which two are not Available, one is paused and one is held: the digest reaches every other
// member, partition by partition, within maxUnavailable at every watch event, and the rollout
// neither halts nor waits on the four; the blocked ones are listed with their reasons and catch
// up once Available and resumed; the held one stays on its revision until released.
func TestFleetBlockedAndHeld(t *testing.T) {
	t.Parallel()
	registry := suite.registry.Host
	hcNamespace := newNamespace(t)
	var waves []string
	for _, wave := range []string{"canary", "early", "late"} {
		for range 4 {
			waves = append(waves, wave)
		}
	}
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, waves...)
	partitionOf := map[string]string{}
	byName := map[string]*unstructured.Unstructured{}
	for ns, hc := range clusters {
		partitionOf[ns] = hc.GetLabels()["rollout-wave"]
		byName[hc.GetName()] = hc
		kubeconfig, err := suite.hosted.Kubeconfig("hcp-"+ns, "system:masters")
		require.NoError(t, err)
		putConnectorSecret(t, ns, kubeconfig)
	}
	nsOf := func(name string) string { return hcNamespace + "-" + name }
	// hc1 (canary) and hc9 (late) go unavailable, hc5 (early) is paused, hc6 (early) is held.
	unavailable := []string{"hc1", "hc9"}
	paused, held := "hc5", "hc6"
	aside := map[string]bool{nsOf("hc1"): true, nsOf("hc9"): true, nsOf(paused): true, nsOf(held): true}

	repo := "fleet-blocked/" + hcNamespace
	push := func(version string) string {
		t.Helper()
		return pushPackageTo(t, writePackage(t, fleetHostedPackage(version)), registry+"/"+repo+":stable")
	}
	v1 := push("1")
	one := intstr.FromInt32(1)
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "blocked-" + hcNamespace[len(hcNamespace)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template: v1alpha1.PackageTemplate{
				Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
			},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable:   &one,
				Partitions:       &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "early", "late"}}},
				Soak:             &metav1.Duration{Duration: time.Second},
				ProgressDeadline: &metav1.Duration{Duration: 15 * time.Second},
			},
		},
	}
	w := watchFleet(t, fleet.Name, partitionOf)
	newFleet(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1)
	require.Equal(t, "12/12/12", got.Status.Progress)

	// Two clusters go down, one is paused, one is held. Their members are counted apart by the
	// watch from here on: the budget is about the others.
	for _, name := range unavailable {
		setHostedClusterAvailable(t, byName[name], false)
	}
	setHostedClusterPaused(t, byName[paused], true)
	reason := "tenant change freeze until Friday"
	holdHostedCluster(t, byName[held], &reason)
	for ns := range aside {
		w.setPartition(ns, "aside")
	}
	eventually(t, func(a *attempt) {
		members := fleetMembers(a, a.Context(), fleet.Name)
		for _, name := range append([]string{paused}, unavailable...) {
			m := members[nsOf(name)]
			ready := conditions.Get(&m, meta.ReadyCondition)
			if assert.NotNil(a, ready, name) {
				assert.Equal(a, v1alpha1.HostedClusterUnavailableReason, ready.Reason, "%s: %s", name, ready.Message)
			}
		}
	}, "the members of the clusters down or paused report it")
	w.reset()

	// A new digest rolls through every other member; the rollout neither halts nor waits.
	v2 := push("2")
	requestFleetReconcile(t, fleet)
	got = waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v2)
	assert.Equal(t, int32(8), got.Status.Updated, "every member but the four set aside")
	assert.Equal(t, int32(3), got.Status.Blocked)
	assert.Equal(t, int32(1), got.Status.Held)
	assert.Zero(t, got.Status.Failed)
	assert.Contains(t, conditions.GetMessage(got, meta.ReadyCondition), "3 blocked, 1 held")
	blocked := map[string]string{}
	for _, m := range got.Status.BlockedMembers {
		blocked[m.Namespace] = m.Reason
		assert.Equal(t, partitionOf[m.Namespace], m.Partition)
	}
	assert.Equal(t, map[string]string{
		nsOf("hc1"): v1alpha1.HostedClusterUnavailableReason, nsOf("hc9"): v1alpha1.HostedClusterUnavailableReason,
		nsOf(paused): v1alpha1.HostedClusterPausedReason,
	}, blocked)
	require.Len(t, got.Status.HeldMembers, 1)
	assert.Equal(t, nsOf(held), got.Status.HeldMembers[0].Namespace)
	assert.Equal(t, v1alpha1.MemberHeldReason, got.Status.HeldMembers[0].Reason)
	assert.Contains(t, got.Status.HeldMembers[0].Message, reason)
	for ns, m := range fleetMembers(t, t.Context(), fleet.Name) {
		want := v2
		if aside[ns] {
			want = v1
		}
		assert.Contains(t, m.Spec.Image, "@"+want, "%s (%s)", ns, partitionOf[ns])
	}

	maxUnavailable, moves, states := w.snapshot()
	for partition, n := range maxUnavailable {
		if partition != "aside" {
			assert.LessOrEqual(t, n, 1, "members of partition %s unavailable at once", partition)
		}
	}
	order := moves[got.Status.Target.Name]
	require.Len(t, order, 8, "every member not set aside moved once: %v", order)
	for _, ns := range order {
		assert.False(t, aside[ns], "%s moved while blocked or held", ns)
	}
	assertPartitionOrder(t, order, partitionOf, "canary", "early", "late")
	if i := index(states, "canary=Progressing"); i >= 0 {
		states = states[i:]
	}
	assert.Less(t, index(states, "canary=Soaking"), index(states, "early=Progressing"), "the blocked canary holds no soak back: %v", states)
	assert.Less(t, index(states, "early=Soaking"), index(states, "late=Progressing"), "%v", states)
	assert.NotContains(t, states, "canary=Halted")

	// Available and resumed, the blocked members catch up; the held one stays.
	for _, name := range unavailable {
		setHostedClusterAvailable(t, byName[name], true)
	}
	setHostedClusterPaused(t, byName[paused], false)
	eventually(t, func(a *attempt) {
		f := &v1alpha1.HostedClusterPackage{}
		if !assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), f)) {
			return
		}
		assert.Equal(a, "11/12/12", f.Status.Progress)
		assert.Empty(a, f.Status.BlockedMembers)
		assert.Len(a, f.Status.HeldMembers, 1)
		members := fleetMembers(a, a.Context(), fleet.Name)
		for _, name := range append([]string{paused}, unavailable...) {
			m := members[nsOf(name)]
			assert.Contains(a, m.Spec.Image, "@"+v2, name)
			assert.True(a, conditions.IsReady(&m) && m.Status.ObservedGeneration == m.Generation, "%s Ready", name)
		}
		assert.Contains(a, members[nsOf(held)].Spec.Image, "@"+v1, "the held member stays")
	}, "the blocked members catch up")
	cm := &corev1.ConfigMap{}
	require.NoError(t, suite.hostedClient.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "fleet-" + nsOf("hc9")}, cm))
	assert.Equal(t, "2", cm.Data["version"], "the caught-up member applied the new revision in its hosted cluster")

	// Released, the held member moves under the normal rules.
	holdHostedCluster(t, byName[held], nil)
	eventually(t, func(a *attempt) {
		f := &v1alpha1.HostedClusterPackage{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), f)) {
			assert.Equal(a, "12/12/12", f.Status.Progress)
			assert.Empty(a, f.Status.HeldMembers)
		}
	}, "the released member moves")
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v2)
}
