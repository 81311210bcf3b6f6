package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/test/testenv"
)

// fleetPackage is version v of a management-only package: one ConfigMap that shows the version,
// the configuration and the HostedCluster's partition label. broken makes the render fail.
func fleetPackage(version string, broken bool) map[string]string {
	body := `data:
  version: "` + version + `"
  message: {{ .config.message | quote }}
  wave: {{ index .environment.hyperShift.hostedCluster.metadata.labels "rollout-wave" | default "none" | quote }}
  platform: {{ .environment.hyperShift.hostedCluster.platform.type | quote }}
`
	if broken {
		body = `data:
  version: {{ fail "this revision is broken on purpose" }}
`
	}
	return map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: fleet-app
spec:
  phases:
  - name: config
  config:
    openAPIV3Schema:
      type: object
      properties:
        message:
          type: string
          default: hello
`,
		"config.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-app
  annotations:
    pkgsync.dev/phase: config
` + body,
	}
}

// newFleetClusters creates HostedClusters labelled with the test's fleet label and their
// hosted-control-plane namespaces, one per partition value given.
func newFleetClusters(t *testing.T, hcNamespace, fleetKey string, waves ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for i, wave := range waves {
		name := fmt.Sprintf("hc%d", i)
		if _, taken := out[name]; taken {
			continue
		}
		out[hosted.ControlPlaneNamespace(hcNamespace, name)] = newFleetCluster(t, hcNamespace, name, fleetKey, wave)
	}
	return out
}

func newFleetCluster(t *testing.T, hcNamespace, name, fleetKey, wave string) *unstructured.Unstructured {
	t.Helper()
	hc := testenv.HostedCluster(hcNamespace, name)
	lbls := map[string]string{"e2e.pkgsync.dev/fleet": fleetKey}
	if wave != "" {
		lbls["rollout-wave"] = wave
	}
	hc.SetLabels(lbls)
	require.NoError(t, unstructured.SetNestedField(hc.Object, map[string]any{"type": "KubeVirt", "kubevirt": map[string]any{"baseDomainPassthrough": true}}, "spec", "platform"))
	createNamespace(t, suite.mgmtClient, hosted.ControlPlaneNamespace(hcNamespace, name), map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"})
	require.NoError(t, suite.mgmtClient.Create(t.Context(), hc))
	setHostedClusterAvailable(t, hc, true)
	return hc
}

// newFleet creates a HostedClusterPackage and deletes it, and waits for its members to go,
// when the test ends.
func newFleet(t *testing.T, fleet *v1alpha1.HostedClusterPackage) {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Create(t.Context(), fleet))
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(ctx, fleet)))
		eventuallyWithin(t, ctx, func(a *attempt) {
			list := &v1alpha1.PackageList{}
			if assert.NoError(a, suite.mgmtClient.List(ctx, list, client.MatchingLabels{v1alpha1.FleetLabel: fleet.Name})) {
				assert.Empty(a, list.Items, "members left")
			}
			err := suite.mgmtClient.Get(ctx, client.ObjectKeyFromObject(fleet), &v1alpha1.HostedClusterPackage{})
			assert.True(a, apierrors.IsNotFound(err), "fleet still exists: %v", err)
		})
	})
}

// updateFleet changes a fleet's spec with a merge patch: the controller writes its status all
// the time, so an update from a read moments ago would conflict.
func updateFleet(t *testing.T, fleet *v1alpha1.HostedClusterPackage, change func(*v1alpha1.HostedClusterPackage)) {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(fleet), fleet))
	patch := client.MergeFrom(fleet.DeepCopy())
	change(fleet)
	require.NoError(t, suite.mgmtClient.Patch(t.Context(), fleet, patch))
}

// requestFleetReconcile asks the fleet to look at its tag again now.
func requestFleetReconcile(t *testing.T, fleet *v1alpha1.HostedClusterPackage) {
	t.Helper()
	patch := client.MergeFrom(fleet.DeepCopy())
	ann := fleet.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	fleet.SetAnnotations(ann)
	require.NoError(t, suite.mgmtClient.Patch(t.Context(), fleet, patch))
}

// waitForFleet waits until the fleet's Ready condition has status and reason and its target is
// the image digest (when given), and returns the fleet.
func waitForFleet(t *testing.T, name string, status metav1.ConditionStatus, reason, digest string) *v1alpha1.HostedClusterPackage {
	t.Helper()
	fleet := &v1alpha1.HostedClusterPackage{}
	eventually(t, func(a *attempt) {
		if !assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Name: name}, fleet)) {
			return
		}
		ready := conditions.Get(fleet, meta.ReadyCondition)
		if assert.NotNil(a, ready) {
			assert.Equal(a, status, ready.Status, ready.Message)
			assert.Equal(a, reason, ready.Reason, ready.Message)
		}
		assert.Equal(a, fleet.Generation, fleet.Status.ObservedGeneration)
		if digest != "" && assert.NotNil(a, fleet.Status.Target) {
			assert.Equal(a, digest, fleet.Status.Target.Digest)
			// Status fields and conditions are two patches: Ready=True is about the digest only
			// once that is the stable revision.
			if status == metav1.ConditionTrue && assert.NotNil(a, fleet.Status.Stable) {
				assert.Equal(a, digest, fleet.Status.Stable.Digest)
			}
		}
		if reason == "RolloutHalted" || reason == "MembersFailed" {
			assert.NotEmpty(a, fleet.Status.FailedMembers, "the failed members, written beside the condition")
		}
	}, "HostedClusterPackage %s", name)
	return fleet
}

// members returns the fleet's member Packages by namespace.
func fleetMembers(t testingT, ctx context.Context, name string) map[string]v1alpha1.Package {
	list := &v1alpha1.PackageList{}
	require.NoError(t, suite.mgmtClient.List(ctx, list, client.MatchingLabels{v1alpha1.FleetLabel: name}))
	out := map[string]v1alpha1.Package{}
	for _, p := range list.Items {
		out[p.Namespace] = p
	}
	return out
}

// memberWatch follows a fleet's members and its status through watches, checking at every
// event that no partition has more than maxUnavailable members unavailable, and recording the
// order in which members move to new revisions and partitions change state.
type memberWatch struct {
	mu sync.Mutex
	// partitionOf maps a member's namespace to its partition.
	partitionOf map[string]string
	members     map[string]v1alpha1.Package
	// maxUnavailable seen per partition.
	maxUnavailable map[string]int
	// moves records member namespaces in the order they first showed a revision.
	moves map[string][]string // revision → namespaces in order
	// partitionStates records partition state changes in order, as "partition=State".
	partitionStates []string
}

func watchFleet(t *testing.T, fleetName string, partitionOf map[string]string) *memberWatch {
	t.Helper()
	w := &memberWatch{partitionOf: maps.Clone(partitionOf), members: map[string]v1alpha1.Package{}, maxUnavailable: map[string]int{}, moves: map[string][]string{}}
	wc, err := client.NewWithWatch(suite.mgmt.Config, client.Options{Scheme: suite.scheme})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	pkgs, err := wc.Watch(ctx, &v1alpha1.PackageList{}, client.MatchingLabels{v1alpha1.FleetLabel: fleetName})
	require.NoError(t, err)
	fleets, err := wc.Watch(ctx, &v1alpha1.HostedClusterPackageList{}, client.MatchingFields{"metadata.name": fleetName})
	require.NoError(t, err)
	t.Cleanup(pkgs.Stop)
	t.Cleanup(fleets.Stop)
	go func() {
		for ev := range pkgs.ResultChan() {
			if p, ok := ev.Object.(*v1alpha1.Package); ok {
				w.observeMember(ev.Type, p)
			}
		}
	}()
	go func() {
		for ev := range fleets.ResultChan() {
			if f, ok := ev.Object.(*v1alpha1.HostedClusterPackage); ok {
				w.observeFleet(f)
			}
		}
	}()
	return w
}

func (w *memberWatch) observeMember(typ watch.EventType, p *v1alpha1.Package) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if typ == watch.Deleted {
		delete(w.members, p.Namespace)
		return
	}
	rev := p.Annotations[v1alpha1.FleetRevisionAnnotation]
	if prev, ok := w.members[p.Namespace]; !ok || prev.Annotations[v1alpha1.FleetRevisionAnnotation] != rev {
		w.moves[rev] = append(w.moves[rev], p.Namespace)
	}
	w.members[p.Namespace] = *p
	unavailable := map[string]int{}
	for ns, m := range w.members {
		if !conditions.IsReady(&m) || m.Status.ObservedGeneration != m.Generation {
			unavailable[w.partitionOf[ns]]++
		}
	}
	for partition, n := range unavailable {
		w.maxUnavailable[partition] = max(w.maxUnavailable[partition], n)
	}
}

func (w *memberWatch) observeFleet(f *v1alpha1.HostedClusterPackage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range f.Status.Partitions {
		entry := p.Name + "=" + string(p.State)
		last := ""
		for _, s := range w.partitionStates {
			if strings.HasPrefix(s, p.Name+"=") {
				last = s
			}
		}
		if last != entry {
			w.partitionStates = append(w.partitionStates, entry)
		}
	}
}

// setPartition records the partition of a member that joins.
func (w *memberWatch) setPartition(namespace, partition string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partitionOf[namespace] = partition
}

// reset forgets the moves and maxima seen so far, for the next rollout.
func (w *memberWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.maxUnavailable = map[string]int{}
	w.moves = map[string][]string{}
	w.partitionStates = nil
}

func (w *memberWatch) snapshot() (maxUnavailable map[string]int, moves map[string][]string, states []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	maxUnavailable = map[string]int{}
	for k, v := range w.maxUnavailable {
		maxUnavailable[k] = v
	}
	moves = map[string][]string{}
	for k, v := range w.moves {
		moves[k] = append([]string(nil), v...)
	}
	return maxUnavailable, moves, append([]string(nil), w.partitionStates...)
}

// index returns where s first appears in list, -1 when absent.
func index(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// assertPartitionOrder asserts that the members in order (namespaces, as they moved) moved
// partition by partition: the last of each partition before the first of the next.
func assertPartitionOrder(t *testing.T, order []string, partitionOf map[string]string, partitions ...string) {
	t.Helper()
	first, last := map[string]int{}, map[string]int{}
	for i, ns := range order {
		p := partitionOf[ns]
		if _, ok := first[p]; !ok {
			first[p] = i
		}
		last[p] = i
	}
	for i := 1; i < len(partitions); i++ {
		assert.Less(t, last[partitions[i-1]], first[partitions[i]], "%s before %s: %v", partitions[i-1], partitions[i], order)
	}
}

// TestFleetRollout rolls a package out to 20 HostedClusters in three partitions and through a
// series of new revisions: partition by partition, maxUnavailable respected at every moment, a
// soak between partitions, a broken revision halted in the first partition and resumed by a
// fixed push, a pause with a HostedCluster joining, a HostedCluster leaving, drift reverted,
// config overrides; one HEAD per interval for the whole fleet.
func TestFleetRollout(t *testing.T) {
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
	member.Spec.Image = registry + "/" + repo + ":stable@" + v1
	member.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"message":"edited"}`)}
	require.NoError(t, suite.mgmtClient.Update(t.Context(), member, client.FieldOwner("someone")))
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

// TestFleetEdgeCases: a selector that matches nothing is Ready with 0 members; a Package of the
// member's name that is not the fleet's is left alone and reported; a template that fails for
// one cluster fails that member only and halts the rollout with its reason.
func TestFleetEdgeCases(t *testing.T) {
	registry := suite.registry.Host
	hcNamespace := newNamespace(t)
	repo := "fleet-edge/" + hcNamespace
	digest := pushPackageTo(t, writePackage(t, fleetPackage("1", false)), registry+"/"+repo+":v1")

	t.Run("nothing selected", func(t *testing.T) {
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "empty-" + hcNamespace[len(hcNamespace)-8:]},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": "nobody"}},
				Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1"}},
			},
		}
		newFleet(t, fleet)
		got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)
		assert.Contains(t, conditions.GetMessage(got, meta.ReadyCondition), "0 members")
	})

	t.Run("collision", func(t *testing.T) {
		clusters := newFleetClusters(t, hcNamespace, hcNamespace, "a", "a")
		name := "edge-" + hcNamespace[len(hcNamespace)-8:]
		var taken string
		for ns := range clusters {
			taken = ns
			break
		}
		theirs := &v1alpha1.Package{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: taken, Labels: map[string]string{"owner": "someone-else"}},
			Spec:       v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1", Suspend: true},
		}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), theirs))
		t.Cleanup(func() { deleteAndWait(t, theirs) })
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
				Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1"}},
			},
		}
		newFleet(t, fleet)
		got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, "MembersFailed", digest)
		require.Len(t, got.Status.FailedMembers, 1)
		assert.Equal(t, taken, got.Status.FailedMembers[0].Namespace)
		assert.Equal(t, v1alpha1.CollisionReason, got.Status.FailedMembers[0].Reason)
		assert.Equal(t, int32(1), got.Status.Total, "the other cluster has its member")
		still := &v1alpha1.Package{}
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(theirs), still))
		assert.Equal(t, theirs.Spec.Image, still.Spec.Image, "not overwritten")
		assert.NotContains(t, still.Labels, v1alpha1.FleetLabel)
	})

	t.Run("a template that fails for one cluster fails that member only", func(t *testing.T) {
		ns := newNamespace(t)
		clusters := newFleetClusters(t, ns, ns, "with-tier", "without-tier")
		for cp, hc := range clusters {
			if hc.GetLabels()["rollout-wave"] == "with-tier" {
				hc.SetLabels(map[string]string{"e2e.pkgsync.dev/fleet": ns, "rollout-wave": "with-tier", "tier": "gold"})
				require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))
				clusters[cp] = hc
			}
		}
		files := fleetPackage("1", false)
		files["config.yaml.gotmpl"] = `apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-app
  annotations:
    pkgsync.dev/phase: config
data:
  tier: {{ with index .environment.hyperShift.hostedCluster.metadata.labels "tier" }}{{ . | quote }}{{ else }}{{ fail "the HostedCluster needs a tier label" }}{{ end }}
`
		all := intstr.FromString("100%")
		tierDigest := pushPackageTo(t, writePackage(t, files), registry+"/"+repo+":tier")
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "tier-" + ns[len(ns)-8:]},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": ns}},
				Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":tier"}},
				Rollout:               v1alpha1.FleetRolloutStrategy{MaxUnavailable: &all},
			},
		}
		newFleet(t, fleet)
		got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, "RolloutHalted", tierDigest)
		require.Len(t, got.Status.FailedMembers, 1)
		failed := got.Status.FailedMembers[0]
		assert.Equal(t, v1alpha1.RenderFailedReason, failed.Reason)
		assert.Contains(t, failed.Message, "the HostedCluster needs a tier label")
		assert.Equal(t, "without-tier", clusters[failed.Namespace].GetLabels()["rollout-wave"])
		eventually(t, func(a *attempt) {
			for cp, hc := range clusters {
				if hc.GetLabels()["rollout-wave"] != "with-tier" {
					continue
				}
				cm := &corev1.ConfigMap{}
				if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: cp, Name: "fleet-app"}, cm)) {
					assert.Equal(a, "gold", cm.Data["tier"])
				}
			}
		})
	})

	t.Run("invalid rollout refused at admission", func(t *testing.T) {
		zero := intstr.FromString("0%")
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "invalid-" + hcNamespace[len(hcNamespace)-8:]},
			Spec: v1alpha1.HostedClusterPackageSpec{
				Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1"}},
				Rollout:  v1alpha1.FleetRolloutStrategy{MaxUnavailable: &zero},
			},
		}
		err := suite.mgmtClient.Create(t.Context(), fleet)
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "%v", err)
		assert.Contains(t, err.Error(), "spec.rollout.maxUnavailable must be a count of at least 1 or a percentage from 1% to 100%")

		fleet.Spec.Rollout = v1alpha1.FleetRolloutStrategy{}
		fleet.Spec.Template.Spec = v1alpha1.PackageSpec{Image: registry + "/" + repo, Semver: ">=1.0.0"}
		err = suite.mgmtClient.Create(t.Context(), fleet)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.template.spec.semver is not supported by a HostedClusterPackage yet")
	})
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
