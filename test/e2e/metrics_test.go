package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestMetrics scrapes /metrics of a controller process while a Package and a hosted
// ObjectDeployment go through their lives, and checks that every pkgsync_* and gotk_* series
// exists and moves as docs/operations.md says.
func TestMetrics(t *testing.T) {
	t.Parallel()
	proc := runController(t, "metrics")
	_, hcp := newHostedControlPlane(t, "", true)
	registry := suite.registry.Host
	repo := "e2e/" + hcp + "/metrics:v1"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "a", "b")), repo)
	pkg := newPackage(hcp, "metered", registry+"/"+repo, "")
	pkg.Labels = map[string]string{shardLabel: "metrics"}
	createPackage(t, pkg)
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	ref := map[string]string{"kind": v1alpha1.PackageKind, "name": pkg.Name, "namespace": hcp}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range ref {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	is := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	atLeast := func(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }
	objects := func(action string) map[string]string {
		return map[string]string{"kind": v1alpha1.PackageKind, "action": action}
	}

	t.Run("gotk metrics of a Ready Package", func(t *testing.T) {
		waitForMetric(t, proc, "gotk_reconcile_condition", with(map[string]string{"type": "Ready", "status": "True"}), "1", is(1))
		waitForMetric(t, proc, "gotk_reconcile_condition", with(map[string]string{"type": "Ready", "status": "False"}), "0", is(0))
		waitForMetric(t, proc, "gotk_suspend_status", ref, "0", is(0))
		waitForMetric(t, proc, "gotk_reconcile_duration_seconds", ref, ">= 1 observation", atLeast(1))
	})
	t.Run("pkgsync metrics of the first pull", func(t *testing.T) {
		waitForMetric(t, proc, "pkgsync_pulls_total", map[string]string{"outcome": "rendered"}, "1", is(1))
		waitForMetric(t, proc, "pkgsync_pull_duration_seconds", map[string]string{"registry": registry}, "1 observation", is(1))
		waitForMetric(t, proc, "pkgsync_pull_bytes_total", map[string]string{"registry": registry}, "> 0", func(v float64) bool { return v > 0 })
		waitForMetric(t, proc, "pkgsync_objects_applied_total", objects("created"), "2", is(2))
	})

	t.Run("an unchanged reconcile counts a cached render and unchanged objects", func(t *testing.T) {
		durations := currentMetric(t, proc, "gotk_reconcile_duration_seconds", ref)
		waitForHandledRequest(t, pkg)
		waitForMetric(t, proc, "pkgsync_pulls_total", map[string]string{"outcome": "cached"}, ">= 1", atLeast(1))
		waitForMetric(t, proc, "pkgsync_objects_applied_total", objects("unchanged"), ">= 2", atLeast(2))
		waitForMetric(t, proc, "gotk_reconcile_duration_seconds", ref, "one more observation", atLeast(durations+1))
		assert.Equal(t, 1.0, currentMetric(t, proc, "pkgsync_pulls_total", map[string]string{"outcome": "rendered"}))
	})

	t.Run("a new revision counts created, configured and pruned objects", func(t *testing.T) {
		v2 := configMapsPackage("", nil, "a", "c")
		v2["objects.yaml"] = strings.Replace(v2["objects.yaml"], "\ndata:\n  name: a\n", "\ndata:\n  name: a\n  revision: \"2\"\n", 1)
		digest2 := pushPackage(t, writePackage(t, v2), repo)
		requestReconcile(t, pkg)
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			var got v1alpha1.Package
			if assert.NoError(ct, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got)) {
				assert.Equal(ct, digest2, got.Status.LastAppliedRevision)
			}
		}, timeout, interval)
		waitForMetric(t, proc, "pkgsync_objects_applied_total", objects("created"), "3", is(3))
		waitForMetric(t, proc, "pkgsync_objects_applied_total", objects("configured"), "1", is(1))
		waitForMetric(t, proc, "pkgsync_objects_applied_total", objects("pruned"), "1", is(1))
		waitForMetric(t, proc, "pkgsync_pulls_total", map[string]string{"outcome": "rendered"}, "2", is(2))
		waitForMetric(t, proc, "pkgsync_pull_duration_seconds", map[string]string{"registry": registry}, "2 observations", is(2))
	})

	t.Run("a failed pull turns Ready False", func(t *testing.T) {
		updateObject(t, pkg, func() { pkg.Spec.Image = registry + "/e2e/" + hcp + "/metrics@sha256:" + strings.Repeat("0", 64) })
		waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.PullFailedReason)
		waitForMetric(t, proc, "pkgsync_pulls_total", map[string]string{"outcome": "failed"}, ">= 1", atLeast(1))
		waitForMetric(t, proc, "gotk_reconcile_condition", with(map[string]string{"type": "Ready", "status": "False"}), "1", is(1))
		waitForMetric(t, proc, "gotk_reconcile_condition", with(map[string]string{"type": "Ready", "status": "True"}), "0", is(0))
	})

	t.Run("suspend", func(t *testing.T) {
		updateObject(t, pkg, func() { pkg.Spec.Suspend = true })
		waitForMetric(t, proc, "gotk_suspend_status", ref, "1", is(1))
	})

	t.Run("hosted clusters", func(t *testing.T) {
		proxy := startProxy(t, hostOf(t, suite.hosted.Config))
		kubeconfig, err := suite.hosted.ConnectorKubeconfig("metrics-" + hcp)
		require.NoError(t, err)
		putConnectorSecret(t, hcp, rewriteServer(t, kubeconfig, "https://"+proxy.addr))
		hostedNS := "metrics-" + strings.TrimPrefix(hcp, "e2e-")
		if len(hostedNS) > 63 {
			hostedNS = hostedNS[:63]
		}
		deleteHostedNamespaceAtEnd(t, hostedNS)
		od := shardedInlineDeployment(t, "metrics", hcp, "metered", hostedNS)
		createPackage(t, od)
		waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		waitForMetric(t, proc, "pkgsync_hosted_clusters", map[string]string{"state": "Closed"}, "1", is(1))
		waitForMetric(t, proc, "pkgsync_hosted_request_seconds_total", nil, "> 0", func(v float64) bool { return v > 0 })

		// The hosted API server goes away: the circuit opens and the prober fails.
		proxy.stop()
		requestReconcile(t, od)
		waitForReady(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason)
		waitForMetric(t, proc, "pkgsync_hosted_clusters", map[string]string{"state": "Closed"}, "0", is(0))
		waitForMetric(t, proc, "pkgsync_hosted_clusters", map[string]string{"state": "Open"}, "1", is(1))
		waitForMetric(t, proc, "pkgsync_hosted_probe_duration_seconds", map[string]string{"outcome": "failure"}, ">= 1 observation", atLeast(1))
		waitForMetric(t, proc, "pkgsync_hosted_next_probe_timestamp_seconds", map[string]string{"namespace": hcp}, "a time", func(v float64) bool { return v > 0 })

		// It answers again: a probe succeeds and the circuit closes.
		proxy.start(t)
		waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		waitForMetric(t, proc, "pkgsync_hosted_probe_duration_seconds", map[string]string{"outcome": "success"}, ">= 1 observation", atLeast(1))
		waitForMetric(t, proc, "pkgsync_hosted_clusters", map[string]string{"state": "Closed"}, "1", is(1))
		waitForMetric(t, proc, "pkgsync_hosted_clusters", map[string]string{"state": "Open"}, "0", is(0))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			m, err := proc.scrape(t.Context())
			if assert.NoError(ct, err) {
				_, found := sum(m, "pkgsync_hosted_next_probe_timestamp_seconds", map[string]string{"namespace": hcp})
				assert.False(ct, found, "no next probe time for a reachable hosted cluster")
			}
		}, timeout, interval)
	})
}
