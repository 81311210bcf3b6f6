package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// TestFleetRollout rolls a package out to 20 HostedClusters in three partitions and through a
// series of new revisions: partition by partition, maxUnavailable respected at every moment, a
// soak between partitions, a broken revision halted in the first partition and resumed by a
// fixed push, a pause with a HostedCluster joining, a HostedCluster leaving, drift reverted,
// config overrides; one HEAD per interval for the whole fleet.
func TestFleetRollout(t *testing.T) {
	t.Parallel()
	registry, counter := suite.registry.Host, suite.registryRequests
	hcNamespace := newNamespace(t)
	waves := []string{"canary", "canary"}
	for range 6 {
		waves = append(waves, "early")
	}
	for range 12 {
		waves = append(waves, "late")
	}
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, waves...)
	partitionOf := map[string]string{}
	for ns, hc := range clusters {
		partitionOf[ns] = hc.GetLabels()["rollout-wave"]
	}
	repo := "fleet/" + hcNamespace
	tagPath := "/v2/" + repo + "/manifests/stable"
	pushTo := func(version string, broken bool) string {
		t.Helper()
		img := writePackage(t, fleetPackage(version, broken))
		return pushPackageTo(t, img, registry+"/"+repo+":stable")
	}
	v1 := pushTo("1", false)
	headsAfterPush := counter.count(http.MethodHead, tagPath)

	two := intstr.FromInt32(2)
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-" + hcNamespace[len(hcNamespace)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template: v1alpha1.PackageTemplate{
				Metadata: v1alpha1.TemplateMetadata{Labels: map[string]string{"team": "platform"}},
				Spec:     v1alpha1.PackageSpec{Image: registry + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
			},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable:   &two,
				Partitions:       &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "early", "*"}}},
				Soak:             &metav1.Duration{Duration: 2 * time.Second},
				ProgressDeadline: &metav1.Duration{Duration: time.Minute},
			},
		},
	}
	w := watchFleet(t, fleet.Name, partitionOf)
	newFleet(t, fleet)

	checkRollout := func(digest string) {
		t.Helper()
		got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)
		require.NotNil(t, got.Status.Stable)
		assert.Equal(t, digest, got.Status.Stable.Digest)
		assert.Equal(t, "20/20/20", got.Status.Progress)
		members := fleetMembers(t, t.Context(), fleet.Name)
		require.Len(t, members, 20)
		for ns, m := range members {
			assert.Equal(t, registry+"/"+repo+":stable@"+digest, m.Spec.Image, ns)
			assert.Equal(t, "platform", m.Labels["team"])
		}
		maxUnavailable, moves, states := w.snapshot()
		for partition, n := range maxUnavailable {
			assert.LessOrEqual(t, n, 2, "members of partition %s unavailable at once", partition)
		}
		order := moves[got.Status.Target.Name]
		require.Len(t, order, 20, "every member moved once")
		assertPartitionOrder(t, order, partitionOf, "canary", "early", "late")
		// The soak: canary soaked and completed before early started, early before late. The
		// states the watch saw before this rollout started are dropped.
		if i := index(states, "canary=Progressing"); i >= 0 {
			states = states[i:]
		}
		assert.Less(t, index(states, "canary=Soaking"), index(states, "canary=Complete"), "%v", states)
		assert.Less(t, index(states, "canary=Complete"), index(states, "early=Progressing"), "%v", states)
		assert.Less(t, index(states, "early=Soaking"), index(states, "late=Progressing"), "%v", states)
	}

	// The first rollout creates the members partition by partition.
	checkRollout(v1)
	for ns := range clusters {
		cm := &corev1.ConfigMap{}
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "fleet-app"}, cm))
		assert.Equal(t, "1", cm.Data["version"])
		assert.Equal(t, partitionOf[ns], cm.Data["wave"], "the template sees the HostedCluster's labels")
		assert.Equal(t, "KubeVirt", cm.Data["platform"], "and its platform")
	}
	assert.Equal(t, 1, counter.count(http.MethodHead, tagPath)-headsAfterPush, "one HEAD for the whole fleet; members are pinned to the digest")

	// A new push is rolled out when the fleet looks at its tag again.
	w.reset()
	v2 := pushTo("2", false)
	heads := counter.count(http.MethodHead, tagPath)
	requestFleetReconcile(t, fleet)
	checkRollout(v2)
	assert.Equal(t, 1, counter.count(http.MethodHead, tagPath)-heads, "one HEAD per interval (and per request) for the whole fleet")
	// The controller runs in this process: its metrics are in controller-runtime's registry.
	assert.Equal(t, 20.0, gatheredValue(t, "pkgsync_fleet_members", map[string]string{"fleet": fleet.Name, "state": "ready"}))
	assert.Equal(t, 20.0, gatheredValue(t, "pkgsync_fleet_members", map[string]string{"fleet": fleet.Name, "state": "updated"}))
	assert.GreaterOrEqual(t, gatheredValue(t, "pkgsync_fleet_partition_rollout_duration_seconds", map[string]string{"fleet": fleet.Name}), 3.0,
		"one observation per partition of the v2 rollout")

	// A broken revision halts in the first partition; the others stay on v2.
	v3 := pushTo("3", true)
	requestFleetReconcile(t, fleet)
	halted := waitForFleet(t, fleet.Name, metav1.ConditionFalse, "RolloutHalted", v3)
	assert.True(t, conditions.IsStalled(halted))
	assert.Contains(t, conditions.GetMessage(halted, meta.ReadyCondition), "RenderFailed")
	assert.Equal(t, "canary", halted.Status.CurrentPartition)
	require.NotEmpty(t, halted.Status.FailedMembers)
	assert.Equal(t, "canary", halted.Status.FailedMembers[0].Partition)
	for ns, m := range fleetMembers(t, t.Context(), fleet.Name) {
		if partitionOf[ns] != "canary" {
			assert.Contains(t, m.Spec.Image, v2, "%s (%s) must stay on the stable revision", ns, partitionOf[ns])
		}
	}
	assert.Equal(t, v2, halted.Status.Stable.Digest)

	// A fixed push to the same tag resumes the rollout.
	w.reset()
	v4 := pushTo("4", false)
	requestFleetReconcile(t, fleet)
	checkRollout(v4)

	// Paused: a new revision waits; a HostedCluster that joins gets the stable revision.
	updateFleet(t, fleet, func(f *v1alpha1.HostedClusterPackage) { f.Spec.Rollout.Paused = true })
	v5 := pushTo("5", false)
	requestFleetReconcile(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionFalse, "RolloutPaused", v5)
	joined := newFleetCluster(t, hcNamespace, "joined", hcNamespace, "late")
	joinedNS := hosted.ControlPlaneNamespace(hcNamespace, "joined")
	w.setPartition(joinedNS, "late")
	partitionOf[joinedNS] = "late"
	eventually(t, func(a *attempt) {
		members := fleetMembers(a, a.Context(), fleet.Name)
		if assert.Contains(a, members, joinedNS) {
			assert.Contains(a, members[joinedNS].Spec.Image, v4, "a cluster joining a paused rollout gets the stable revision")
		}
	})
	for ns, m := range fleetMembers(t, t.Context(), fleet.Name) {
		assert.NotContains(t, m.Spec.Image, v5, "%s moved while paused", ns)
	}

	// Unpaused, the rollout finishes, the new cluster included.
	updateFleet(t, fleet, func(f *v1alpha1.HostedClusterPackage) { f.Spec.Rollout.Paused = false })
	got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v5)
	assert.Equal(t, "21/21/21", got.Status.Progress)

	// A HostedCluster that leaves takes its member (and the member's objects) with it.
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), joined))
	eventually(t, func(a *attempt) {
		assert.NotContains(a, fleetMembers(a, a.Context(), fleet.Name), joinedNS)
		cm := &corev1.ConfigMap{}
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: joinedNS, Name: "fleet-app"}, cm)
		assert.True(a, apierrors.IsNotFound(err), "the member's objects are torn down: %v", err)
	})

	// Drift: an edit of a member is reverted.
	var victim string
	for ns := range clusters {
		victim = ns
		break
	}
	member := &v1alpha1.Package{}
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: victim, Name: fleet.Name}, member))
	pinned := member.Spec.Image
	updateObject(t, member, func() {
		member.Spec.Image = registry + "/" + repo + ":stable@" + v1
		member.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"message":"edited"}`)}
	}, client.FieldOwner("someone"))
	eventually(t, func(a *attempt) {
		m := &v1alpha1.Package{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: victim, Name: fleet.Name}, m)) {
			assert.Equal(a, pinned, m.Spec.Image)
			assert.Nil(a, m.Spec.Config)
		}
	})

	// Config overrides give one partition its own values.
	updateFleet(t, fleet, func(f *v1alpha1.HostedClusterPackage) {
		f.Spec.ConfigOverrides = []v1alpha1.ConfigOverride{{
			HostedClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"rollout-wave": "canary"}},
			Config:                &apiextensionsv1.JSON{Raw: []byte(`{"message":"canary says hi"}`)},
		}}
	})
	eventually(t, func(a *attempt) {
		f := &v1alpha1.HostedClusterPackage{}
		if !assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), f)) {
			return
		}
		assert.True(a, conditions.IsReady(f) && f.Status.ObservedGeneration == f.Generation && f.Status.Stable != nil &&
			f.Status.Stable.Name == f.Status.Target.Name, "rolled out")
		for ns := range clusters {
			cm := &corev1.ConfigMap{}
			if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: "fleet-app"}, cm)) {
				want := "hello"
				if partitionOf[ns] == "canary" {
					want = "canary says hi"
				}
				assert.Equal(a, want, cm.Data["message"], ns)
			}
		}
	})
	assert.Equal(t, 4, counter.count(http.MethodHead, tagPath)-heads, "one HEAD per reconcile request, none from members")
}

// gatheredValue reads a gauge's value, or a histogram's observation count, from the metrics of
// the controller running in this process.
func gatheredValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue metrics
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}
