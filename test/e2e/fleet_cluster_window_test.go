package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
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

// setClusterWindows sets the pkgsync.dev/maintenance-windows annotation of a HostedCluster to
// value with a merge patch.
func setClusterWindows(t *testing.T, hc *unstructured.Unstructured, value string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.MaintenanceWindowsAnnotation, value))
	require.NoError(t, suite.mgmtClient.Patch(t.Context(), hc, client.RawPatch(types.MergePatchType, patch)))
}

// dailyWindow is a window of the annotation's syntax that opens every day at the minute of
// opens (UTC) and stays open for duration.
func dailyWindow(opens time.Time, duration string) string {
	return fmt.Sprintf(`[{"schedule":"%d %d * * *","duration":%q,"timeZone":"UTC"}]`, opens.Minute(), opens.Hour(), duration)
}

// TestFleetClusterWindows: two fleets over the same three HostedClusters, two of which have a
// maintenance window of their own (pkgsync.dev/maintenance-windows) that is closed now. Their
// first install is not held. A new revision reaches the free cluster's member of both fleets
// and neither fleet's member of the frozen clusters (not a write to them): the fleets complete
// with them aside, listed apart with when their window opens, and pkgsync fleet status shows
// them. An annotation that cannot be read holds its cluster's members too, and both fleets and a
// Warning event say which HostedCluster, what is wrong and how to fix it, without failing
// either fleet. A window open now lets the members move; one that opens a minute later moves
// its cluster's members when it opens, with no other event to wake the fleets.
func TestFleetClusterWindows(t *testing.T) {
	t.Parallel()
	registry := suite.registry.Host
	hcNamespace := newNamespace(t)
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "canary", "prod", "prod")
	byName := map[string]*unstructured.Unstructured{}
	for _, hc := range clusters {
		byName[hc.GetName()] = hc
	}
	nsOf := func(name string) string { return hcNamespace + "-" + name }
	free, invalid, waiting := nsOf("hc0"), nsOf("hc1"), nsOf("hc2")
	clusterOf := map[string]string{invalid: hcNamespace + "/hc1", waiting: hcNamespace + "/hc2"}

	// Closed now: it opens in twelve hours, for a minute.
	opens := time.Now().UTC().Add(12 * time.Hour).Truncate(time.Minute)
	closed := dailyWindow(opens, "1m")
	setClusterWindows(t, byName["hc1"], closed)
	setClusterWindows(t, byName["hc2"], closed)

	suffix := hcNamespace[len(hcNamespace)-8:]
	one := intstr.FromInt32(1)
	type fleetUnderTest struct {
		fleet *v1alpha1.HostedClusterPackage
		push  func(version string) string
	}
	var fleets []fleetUnderTest
	for _, name := range []string{"a", "b"} {
		repo := registry + "/fleet-cluster-window-" + name + "/" + hcNamespace
		f := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "cwin-" + name + "-" + suffix},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
				Template: v1alpha1.PackageTemplate{
					Spec: v1alpha1.PackageSpec{Image: repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
				},
			},
		}
		if name == "b" {
			// The second fleet rolls out partition by partition: the cluster's windows apply
			// whatever the partition.
			f.Spec.Rollout = v1alpha1.FleetRolloutStrategy{MaxUnavailable: &one,
				Partitions: &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "prod"}}}}
		}
		fleets = append(fleets, fleetUnderTest{fleet: f, push: func(version string) string {
			t.Helper()
			// Each fleet's package writes a ConfigMap of its own in the members' namespaces.
			files := fleetPackage(version, false)
			files["config.yaml.gotmpl"] = strings.Replace(files["config.yaml.gotmpl"], "name: fleet-app\n", "name: fleet-app-"+name+"\n", 1)
			return pushPackageTo(t, writePackage(t, files), repo+":stable")
		}})
	}

	// The first install is not held by a closed window.
	v1 := map[string]string{}
	for _, f := range fleets {
		v1[f.fleet.Name] = f.push("1")
		newFleet(t, f.fleet)
	}
	for _, f := range fleets {
		got := waitForFleet(t, f.fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1[f.fleet.Name])
		assert.Equal(t, "3/3/3", got.Status.Progress, f.fleet.Name)
		assert.Empty(t, got.Status.WindowHeldMembers, "%s: nothing to move yet", f.fleet.Name)
	}

	frozenWrites := func() int {
		n := 0
		for _, f := range fleets {
			for _, ns := range []string{invalid, waiting} {
				path := "/apis/" + v1alpha1.GroupVersion.String() + "/namespaces/" + ns + "/packages/" + f.fleet.Name
				n += suite.requests.path(http.MethodPut, path) + suite.requests.path(http.MethodPatch, path)
			}
		}
		return n
	}
	before := frozenWrites()

	// A new revision of both fleets reaches the free cluster only.
	v2 := map[string]string{}
	for _, f := range fleets {
		v2[f.fleet.Name] = f.push("2")
		requestFleetReconcile(t, f.fleet)
	}
	for _, f := range fleets {
		name := f.fleet.Name
		got := waitForFleet(t, name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v2[name])
		assert.Contains(t, conditions.GetMessage(got, meta.ReadyCondition),
			"1 member(s) Ready on revision "+got.Status.Target.Name+"; 0 blocked, 0 held, 2 waiting for a maintenance window of their HostedCluster", name)
		assert.Equal(t, int32(2), got.Status.WindowHeld, name)
		assert.Empty(t, got.Status.HeldMembers, "%s: apart from the members held by pkgsync.dev/hold", name)
		if assert.Len(t, got.Status.WindowHeldMembers, 2, name) {
			for i, ns := range []string{invalid, waiting} {
				m := got.Status.WindowHeldMembers[i]
				assert.Equal(t, ns, m.Namespace, name)
				assert.Equal(t, v1alpha1.OutsideClusterWindowReason, m.Reason, name)
				assert.Contains(t, m.Message, "HostedCluster "+clusterOf[ns]+": none of its maintenance windows", name)
				if assert.NotNil(t, m.OpensAt, name) {
					assert.Equal(t, opens, m.OpensAt.UTC(), name)
				}
			}
		}
		assert.Equal(t, 2.0, gatheredValue(t, "pkgsync_fleet_members", map[string]string{"fleet": name, "state": "window_held"}), name)
		members := fleetMembers(t, t.Context(), name)
		assert.Contains(t, members[free].Spec.Image, "@"+v2[name], "%s: the free cluster's member moved", name)
		for _, ns := range []string{invalid, waiting} {
			assert.Contains(t, members[ns].Spec.Image, "@"+v1[name], "%s: %s stays while its cluster's window is closed", name, ns)
		}
	}
	eventually(t, func(a *attempt) {
		for _, f := range fleets {
			assert.Positive(a, fleetEvents(a, a.Context(), f.fleet.Name, corev1.EventTypeNormal, v1alpha1.OutsideClusterWindowReason), f.fleet.Name)
		}
	}, "an OutsideClusterWindow event on each fleet")

	// An annotation that cannot be read holds the member, and says why, on both fleets.
	setClusterWindows(t, byName["hc1"], `[{"schedule":"0 22 * * 6","duration":"4h","partitions":["prod"]}]`)
	for _, f := range fleets {
		name := f.fleet.Name
		eventually(t, func(a *attempt) {
			got := &v1alpha1.HostedClusterPackage{}
			if !assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(f.fleet), got)) || !assert.Len(a, got.Status.WindowHeldMembers, 2) {
				return
			}
			m := got.Status.WindowHeldMembers[0]
			assert.Equal(a, invalid, m.Namespace)
			assert.Equal(a, v1alpha1.InvalidClusterWindowsReason, m.Reason)
			assert.Contains(a, m.Message, "HostedCluster "+hcNamespace+"/hc1: its annotation pkgsync.dev/maintenance-windows cannot be read")
			assert.Contains(a, m.Message, "[0].partitions")
			assert.Contains(a, m.Message, "remove it to let the cluster's members move at any time")
			assert.Nil(a, m.OpensAt)
			assert.Equal(a, v1alpha1.OutsideClusterWindowReason, got.Status.WindowHeldMembers[1].Reason)
			// The fleet goes on: its reconcile does not fail.
			assert.Equal(a, metav1.ConditionTrue, conditions.Get(got, meta.ReadyCondition).Status)
			assert.Positive(a, fleetEvents(a, a.Context(), name, corev1.EventTypeWarning, v1alpha1.InvalidClusterWindowsReason))
		}, "%s reports hc1's annotation", name)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(t.Context(), crashBinary(t), "fleet", "status", fleets[0].fleet.Name, "--kubeconfig", suite.mgmt.KubeconfigPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), out.String())
	assert.Regexp(t, `Members: +1 updated, 3 ready, 0 failed, 0 blocked, 0 held, 2 waiting for their cluster's window, 3 total`, out.String())
	assert.Regexp(t, `Waiting for their cluster's maintenance window \(pkgsync.dev/maintenance-windows\):\n`+
		`NAMESPACE +PARTITION +REASON +OPENS +MESSAGE\n`+
		invalid+` +\(all\) +InvalidClusterWindows +- +HostedCluster `+hcNamespace+`/hc1: its annotation .*\n`+
		waiting+` +\(all\) +OutsideClusterWindow +`+opens.Format(time.RFC3339)+` \(in 1[12]h\) +HostedCluster `+hcNamespace+`/hc2: `, out.String())
	for _, f := range fleets {
		members := fleetMembers(t, t.Context(), f.fleet.Name)
		assert.Contains(t, members[invalid].Spec.Image, "@"+v1[f.fleet.Name], "%s: a bad annotation holds the member", f.fleet.Name)
	}
	assert.Zero(t, frozenWrites()-before, "member Packages of the frozen clusters written")

	// A window open now lets hc1's members move at once; hc2's window opens in a minute or so,
	// and its members move then, woken by nothing but the fleets' own wake-up.
	setClusterWindows(t, byName["hc1"], `[{"schedule":"* * * * *","duration":"1h"}]`)
	soon := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	if time.Until(soon) < 30*time.Second {
		soon = soon.Add(time.Minute)
	}
	setClusterWindows(t, byName["hc2"], dailyWindow(soon, "1h"))
	for _, f := range fleets {
		name := f.fleet.Name
		eventually(t, func(a *attempt) {
			members := fleetMembers(a, a.Context(), name)
			assert.Contains(a, members[invalid].Spec.Image, "@"+v2[name], "%s: hc1's member moved", name)
			got := &v1alpha1.HostedClusterPackage{}
			if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(f.fleet), got)) && assert.Len(a, got.Status.WindowHeldMembers, 1) {
				assert.Equal(a, waiting, got.Status.WindowHeldMembers[0].Namespace)
				if assert.NotNil(a, got.Status.WindowHeldMembers[0].OpensAt) {
					assert.Equal(a, soon, got.Status.WindowHeldMembers[0].OpensAt.UTC())
				}
			}
		}, "%s moves hc1's member", name)
	}
	if time.Now().Before(soon) {
		for _, f := range fleets {
			assert.Contains(t, fleetMembers(t, t.Context(), f.fleet.Name)[waiting].Spec.Image, "@"+v1[f.fleet.Name], "%s: hc2's window is not open yet", f.fleet.Name)
		}
	}
	for _, f := range fleets {
		name := f.fleet.Name
		eventuallyFor(t, t.Context(), time.Until(soon)+timeout, func(a *attempt) {
			got := &v1alpha1.HostedClusterPackage{}
			if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(f.fleet), got)) {
				assert.Equal(a, "3/3/3", got.Status.Progress)
				assert.Empty(a, got.Status.WindowHeldMembers)
				assert.Zero(a, got.Status.WindowHeld)
			}
		}, "%s moves hc2's member once its window opens", name)
		m := fleetMembers(t, t.Context(), name)[waiting]
		assert.Contains(t, m.Spec.Image, "@"+v2[name], name)
		moved, err := time.Parse(time.RFC3339, m.Annotations[v1alpha1.FleetRevisionTimeAnnotation])
		if assert.NoError(t, err) {
			assert.False(t, moved.Before(soon), "%s: hc2's member moved at %s, before its window opened at %s", name, moved, soon)
		}
		waitForFleet(t, name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v2[name])
	}
}
