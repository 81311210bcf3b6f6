package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
