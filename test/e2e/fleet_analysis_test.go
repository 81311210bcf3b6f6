package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/controller"
	"pkgsync.dev/pkgsync/internal/fleet/analysis"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// errorRates is a Prometheus-compatible HTTPS endpoint (the HTTP API's instant query) that
// answers every query with one sample per hosted-control-plane namespace, the rate the test
// sets, and checks the operator's bearer token.
type errorRates struct {
	*httptest.Server
	mu      sync.Mutex
	rates   map[string]string
	queries int
}

func newErrorRates(t *testing.T, token string, rates map[string]string) *errorRates {
	t.Helper()
	e := &errorRates{rates: rates}
	e.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		e.mu.Lock()
		e.queries++
		var result []map[string]any
		for ns, v := range e.rates {
			result = append(result, map[string]any{"metric": map[string]string{"namespace": ns}, "value": []any{float64(time.Now().Unix()), v}})
		}
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *errorRates) set(ns, rate string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rates[ns] = rate
}

// TestFleetAnalysis rolls a fleet out with spec.rollout.analysis: a query of the test's
// Prometheus-compatible endpoint (error rate per member at most 0.05) and a CEL check of each
// member. A first rollout passes both in each partition; a second, whose canary's error rate
// rises, halts in the canary partition with the member failed by the check (status.analysis
// names the check, its value and when it was evaluated; an AnalysisFailed event), the other
// partition left on the stable revision; once the rate falls back, the next evaluation passes
// and the rollout completes.
func TestFleetAnalysis(t *testing.T) {
	t.Parallel()
	const shard = "fleet-analysis"
	hcNamespace := newNamespace(t)
	canary := hosted.ControlPlaneNamespace(hcNamespace, "hc0")
	rates := newErrorRates(t, "operator-token", map[string]string{
		canary: "0.01", hosted.ControlPlaneNamespace(hcNamespace, "hc1"): "0.01", hosted.ControlPlaneNamespace(hcNamespace, "hc2"): "0.02",
	})
	prometheus, err := analysis.NewPrometheus(rates.URL, func() (string, error) { return "operator-token", nil }, rates.Client().Transport)
	require.NoError(t, err)
	runShardControllerConfigured(t, shard, func(c *controller.Config) { c.AnalysisPrometheus = prometheus })

	newFleetClusters(t, hcNamespace, hcNamespace, "canary", "prod", "prod")
	repo := "fleet-analysis/" + hcNamespace
	push := func(version string) string {
		t.Helper()
		return pushPackageTo(t, writePackage(t, fleetPackage(version, false)), suite.registry.Host+"/"+repo+":stable")
	}
	v1 := push("1")
	two := intstr.FromInt32(2)
	maxRate := "0.05"
	labels := map[string]string{shardLabel: shard}
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "analysis-" + hcNamespace[len(hcNamespace)-8:], Labels: labels},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template: v1alpha1.PackageTemplate{
				Metadata: v1alpha1.TemplateMetadata{Labels: labels},
				Spec:     v1alpha1.PackageSpec{Image: suite.registry.Host + "/" + repo + ":stable", Interval: &metav1.Duration{Duration: time.Hour}},
			},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable:   &two,
				Partitions:       &v1alpha1.FleetPartitions{LabelKey: "rollout-wave", Order: &v1alpha1.PartitionOrder{Static: []string{"canary", "prod"}}},
				ProgressDeadline: &metav1.Duration{Duration: time.Minute},
				Analysis: &v1alpha1.FleetAnalysis{
					Interval: &metav1.Duration{Duration: analysis.MinInterval},
					Checks: []v1alpha1.FleetCheck{
						{Name: "error-rate", Query: &v1alpha1.FleetMetricQuery{PromQL: `sum by (namespace) (rate(http_errors_total[5m]))`, Max: &maxRate}},
						{Name: "ready", CEL: `member.status.conditions.exists(c, c.type == "Ready" && c.status == "True") && cluster.available`},
					},
				},
			},
		},
	}
	newFleet(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v1)
	require.Len(t, got.Status.Analysis, 2)
	for _, res := range got.Status.Analysis {
		assert.Equal(t, v1alpha1.FleetCheckPassed, res.Result, "%s: %s", res.Name, res.Message)
		assert.Equal(t, "prod", res.Partition, "the last partition's soak")
		assert.False(t, res.EvaluatedAt.IsZero())
	}
	assert.Equal(t, "0.02", got.Status.Analysis[0].Value, "the worst value of the partition")

	// v2's canary reports errors: its soak fails the check, the rollout halts there.
	rates.set(canary, "0.5")
	v2 := push("2")
	requestFleetReconcile(t, fleet)
	got = waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.RolloutHaltedReason, v2)
	assert.Equal(t, "canary", got.Status.CurrentPartition)
	if assert.Len(t, got.Status.FailedMembers, 1) {
		assert.Equal(t, canary, got.Status.FailedMembers[0].Namespace)
		assert.Equal(t, v1alpha1.AnalysisFailedReason, got.Status.FailedMembers[0].Reason)
		assert.Contains(t, got.Status.FailedMembers[0].Message, "analysis check error-rate: value 0.5 outside")
	}
	if assert.NotEmpty(t, got.Status.Analysis) {
		res := got.Status.Analysis[0]
		assert.Equal(t, "error-rate", res.Name)
		assert.Equal(t, v1alpha1.FleetCheckFailed, res.Result)
		assert.Equal(t, "0.5", res.Value)
		assert.Equal(t, "canary", res.Partition)
		assert.Equal(t, got.Status.Target.Name, res.Revision)
	}
	for ns, m := range fleetMembers(t, t.Context(), fleet.Name) {
		if ns != canary {
			assert.Contains(t, m.Spec.Image, "@"+v1, "%s stays on the stable revision", ns)
		}
	}
	eventually(t, func(a *attempt) {
		assert.Positive(a, fleetEvents(a, a.Context(), fleet.Name, corev1.EventTypeWarning, v1alpha1.AnalysisFailedReason))
	}, "an AnalysisFailed event")

	// The rate falls back: the next evaluation passes, the rollout goes on and completes.
	rates.set(canary, "0.01")
	got = waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, v2)
	assert.Equal(t, "3/3/3", got.Status.Progress)
	assert.Empty(t, got.Status.FailedMembers)

	// Without an analysis the status has none.
	updateFleet(t, fleet, func(f *v1alpha1.HostedClusterPackage) { f.Spec.Rollout.Analysis = nil })
	eventually(t, func(a *attempt) {
		f := &v1alpha1.HostedClusterPackage{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), f)) {
			assert.Empty(a, f.Status.Analysis)
		}
	}, "status.analysis cleared")
}
