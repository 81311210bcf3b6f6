package e2e

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// dependsPackage is version v of a management-only package named name: one ConfigMap of its
// own name, so that two fleets' members share a namespace without colliding.
func dependsPackage(name, version string) map[string]string {
	return map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: ` + name + `
spec:
  phases:
  - name: config
`,
		"config.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
  annotations:
    pkgsync.dev/phase: config
data:
  version: "` + version + `"
`,
	}
}

// memberEvent is one watch event of a member Package: its fleet and namespace, its revision,
// whether it was Ready on it, being deleted, or gone.
type memberEvent struct {
	fleet, namespace, revision string
	ready, deleting, gone      bool
}

// memberLog records the watch events of the members of some fleets in the order the API server
// sent them (one watch: resourceVersion order).
type memberLog struct {
	mu     sync.Mutex
	events []memberEvent
}

func watchMembers(t *testing.T, fleets ...string) *memberLog {
	t.Helper()
	sel, err := labels.Parse(fmt.Sprintf("%s in (%s)", v1alpha1.FleetLabel, strings.Join(fleets, ",")))
	require.NoError(t, err)
	wc, err := client.NewWithWatch(suite.mgmt.Config, client.Options{Scheme: suite.scheme})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &v1alpha1.PackageList{}, client.MatchingLabelsSelector{Selector: sel})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	log := &memberLog{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1alpha1.Package)
			if !ok {
				continue
			}
			log.mu.Lock()
			log.events = append(log.events, memberEvent{fleet: p.Labels[v1alpha1.FleetLabel], namespace: p.Namespace,
				revision: p.Annotations[v1alpha1.FleetRevisionAnnotation], ready: conditions.IsReady(p) && p.Status.ObservedGeneration == p.Generation,
				deleting: !p.DeletionTimestamp.IsZero(), gone: ev.Type == watch.Deleted})
			log.mu.Unlock()
		}
	}()
	return log
}

// first returns the index of the first event that matches, -1 when none does.
func (l *memberLog) first(match func(memberEvent) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.events {
		if match(e) {
			return i
		}
	}
	return -1
}

// dependsFleet is a fleet of image over the test's clusters, depending on deps.
func dependsFleet(name, hcNamespace, image string, deps ...string) *v1alpha1.HostedClusterPackage {
	f := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			// An hour: only the wakes can drive what the test waits for.
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: image, Interval: &metav1.Duration{Duration: time.Hour}}},
		},
	}
	for _, d := range deps {
		f.Spec.DependsOn = append(f.Spec.DependsOn, v1alpha1.FleetDependency{Name: d})
	}
	return f
}

// TestFleetDependsOn: two fleets over the same three clusters, monitoring depending on
// network. While network's member on one cluster is held on its old revision, monitoring's
// member there waits (listed with DependencyNotReady, naming network and why) and the others
// are installed; once network's member there is Ready on network's revision, monitoring's is
// created, woken by that change (the interval is an hour). Deleting both tears monitoring's
// member down before network's on each cluster, network being deleted first. A cycle is
// refused with the cycle named, and no member of it is created.
func TestFleetDependsOn(t *testing.T) {
	t.Parallel()
	hcNamespace := newNamespace(t)
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "", "", "")
	require.Len(t, clusters, 3)
	suffix := hcNamespace[len(hcNamespace)-8:]
	network, monitoring := "network-"+suffix, "monitoring-"+suffix
	log := watchMembers(t, network, monitoring)
	netImage := suite.registry.Host + "/e2e/" + hcNamespace + "/network:stable"
	monImage := suite.registry.Host + "/e2e/" + hcNamespace + "/monitoring:stable"

	n1 := pushPackageTo(t, writePackage(t, dependsPackage("network", "1")), netImage)
	net := dependsFleet(network, hcNamespace, netImage)
	newFleet(t, net)
	waitForFleet(t, network, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, n1)

	// network's member on hc1 is held on revision 1 while 2 rolls out.
	heldNS := hcNamespace + "-hc1"
	heldMember := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: heldNS, Name: network}}
	hold := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, v1alpha1.HoldAnnotation, value)
		require.NoError(t, suite.mgmtClient.Patch(t.Context(), heldMember, client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	hold(`"network change freeze"`)
	n2 := pushPackageTo(t, writePackage(t, dependsPackage("network", "2")), netImage)
	requestFleetReconcile(t, net)
	net = waitForFleet(t, network, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, n2)
	netRevision := net.Status.Target.Name

	m1 := pushPackageTo(t, writePackage(t, dependsPackage("monitoring", "1")), monImage)
	newFleet(t, dependsFleet(monitoring, hcNamespace, monImage, network))
	mon := waitForFleet(t, monitoring, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, m1)
	assert.Equal(t, "2/2/3", mon.Status.Progress, "installed where network is Ready on its revision")
	assert.Equal(t, int32(1), mon.Status.Blocked)
	assert.Zero(t, mon.Status.Failed, "waiting is no failure")
	if assert.Len(t, mon.Status.BlockedMembers, 1) {
		b := mon.Status.BlockedMembers[0]
		assert.Equal(t, heldNS, b.Namespace)
		assert.Equal(t, v1alpha1.DependencyNotReadyReason, b.Reason)
		assert.Contains(t, b.Message, "fleet "+network+": its member here is on revision")
		assert.Contains(t, b.Message, "not on its revision "+netRevision+" yet")
	}
	assert.Equal(t, []v1alpha1.FleetDependencyStatus{{Name: network, Revision: netRevision, Waiting: 1}}, mon.Status.Dependencies)
	members := fleetMembers(t, t.Context(), monitoring)
	assert.NotContains(t, members, heldNS, "no member while network's there is not Ready on its revision")
	assert.Len(t, members, 2)

	// Released: network's member moves to 2, and monitoring's follows once it is Ready there.
	hold("null")
	eventually(t, func(a *attempt) {
		m, ok := fleetMembers(a, a.Context(), monitoring)[heldNS]
		if assert.True(a, ok, "monitoring's member on hc1") {
			assert.True(a, conditions.IsReady(&m), "Ready")
		}
	}, "monitoring's member on hc1 is created once network's there is Ready on its revision")
	// The watch log may lag the reads above: wait until it holds both events, then compare.
	var firstMon, netReady int
	eventually(t, func(a *attempt) {
		firstMon = log.first(func(e memberEvent) bool { return e.fleet == monitoring && e.namespace == heldNS })
		netReady = log.first(func(e memberEvent) bool {
			return e.fleet == network && e.namespace == heldNS && e.revision == netRevision && e.ready
		})
		assert.GreaterOrEqual(a, firstMon, 0, "monitoring's member on hc1 seen by the watch")
		assert.GreaterOrEqual(a, netReady, 0, "network's member on hc1 seen Ready on %s by the watch", netRevision)
	}, "the watch saw both members")
	assert.Less(t, netReady, firstMon, "network's member Ready on its revision before monitoring's was created")
	waitForFleet(t, monitoring, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, m1)

	// Deleting both, network first: on each cluster monitoring's member goes before network's.
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: network}}))
	waitForReadyMessage(t, &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: network}}, metav1.ConditionFalse, v1alpha1.DeletingReason,
		"waits for the member(s) of "+monitoring+" there to be torn down first")
	assert.Len(t, fleetMembers(t, t.Context(), network), 3, "network's members stay while monitoring's are beside them")
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: monitoring}}))
	eventually(t, func(a *attempt) {
		for _, name := range []string{network, monitoring} {
			err := suite.mgmtClient.Get(a.Context(), client.ObjectKey{Name: name}, &v1alpha1.HostedClusterPackage{})
			assert.True(a, apierrors.IsNotFound(err), "fleet %s gone: %v", name, err)
		}
	}, "both fleets are gone")
	for ns := range clusters {
		var monGone, netDeleting int
		eventually(t, func(a *attempt) {
			monGone = log.first(func(e memberEvent) bool { return e.fleet == monitoring && e.namespace == ns && e.gone })
			netDeleting = log.first(func(e memberEvent) bool { return e.fleet == network && e.namespace == ns && (e.deleting || e.gone) })
			assert.GreaterOrEqual(a, monGone, 0, "monitoring's member in %s seen gone by the watch", ns)
			assert.GreaterOrEqual(a, netDeleting, 0, "network's member in %s seen deleted by the watch", ns)
		}, "the watch saw both members in %s go", ns)
		assert.Less(t, monGone, netDeleting, "in %s, network's member is deleted only once monitoring's is gone", ns)
	}
}

// TestFleetDependencyCycle: fleets whose spec.dependsOn lead back to themselves, through
// another or directly, are refused with the cycle named, and none of their members is created.
func TestFleetDependencyCycle(t *testing.T) {
	t.Parallel()
	hcNamespace := newNamespace(t)
	newFleetClusters(t, hcNamespace, hcNamespace, "", "")
	suffix := hcNamespace[len(hcNamespace)-8:]
	a, b, self := "cycle-a-"+suffix, "cycle-b-"+suffix, "cycle-self-"+suffix
	image := suite.registry.Host + "/e2e/" + hcNamespace + "/cycle:stable"
	pushPackageTo(t, writePackage(t, dependsPackage("cycle", "1")), image)

	// a is created first: b does not exist yet, so a's members wait; b's creation closes the
	// cycle and wakes a.
	newFleet(t, dependsFleet(a, hcNamespace, image, b))
	newFleet(t, dependsFleet(b, hcNamespace, image, a))
	newFleet(t, dependsFleet(self, hcNamespace, image, self))
	for name, cycle := range map[string]string{a: a + " → " + b + " → " + a, b: b + " → " + a + " → " + b, self: self + " → " + self} {
		f := waitForFleet(t, name, metav1.ConditionFalse, v1alpha1.DependencyCycleReason, "")
		assert.Contains(t, conditions.GetMessage(f, meta.ReadyCondition), "dependency cycle: "+cycle, name)
		assert.True(t, conditions.IsStalled(f), "%s stalls", name)
	}
	for _, name := range []string{a, b, self} {
		assert.Empty(t, fleetMembers(t, t.Context(), name), "no member of %s, on a cycle", name)
	}
}
