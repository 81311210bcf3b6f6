package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// tierPackage renders a ConfigMap named tier from its HostedCluster's tier label.
var tierPackage = map[string]string{
	"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: tier\nspec:\n  phases:\n  - name: config\n",
	"tier.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: tier
  annotations:
    pkgsync.dev/phase: config
data:
  tier: {{ index .environment.hyperShift.hostedCluster.metadata.labels "tier" | default "none" | quote }}
`,
}

// TestHostedClusterChangesWakeWhatReadThem: a HostedCluster's labels change. The Package whose
// templates read its HostedCluster is reconciled once per change, at once (its interval is an
// hour); the Package of the same namespace that does not read it is not, and status churn of the
// HostedCluster (HyperShift writes status often) wakes neither. Counted by reconciles.
func TestHostedClusterChangesWakeWhatReadThem(t *testing.T) {
	t.Parallel()
	hc, hcp := newHostedCluster(t, true)
	relabel := func(tier string) {
		t.Helper()
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(hc), hc))
		hc.SetLabels(map[string]string{"tier": tier})
		require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))
	}
	relabel("silver")
	pushPackage(t, writePackage(t, tierPackage), "e2e/"+hcp+"/tier:v1")
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "plain")), "e2e/"+hcp+"/plain:v1")
	reader := newPackage(hcp, "reader", suite.registry.Host+"/e2e/"+hcp+"/tier:v1", "")
	other := newPackage(hcp, "other", suite.registry.Host+"/e2e/"+hcp+"/plain:v1", "")
	for _, pkg := range []*v1alpha1.Package{reader, other} {
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
		t.Cleanup(func() { deleteAndWaitVerify(t, pkg) })
		waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		waitForReadyRecorded(t, pkg)
	}
	assert.Equal(t, "silver", configMapData(t, hcp, "tier")["tier"])
	readerBefore, _ := reconcileDurations(t, v1alpha1.PackageKind, reader)
	otherBefore, _ := reconcileDurations(t, v1alpha1.PackageKind, other)

	relabel("gold")
	eventually(t, func(a *attempt) {
		assert.Equal(a, "gold", configMapData(a, hcp, "tier")["tier"])
		n, _ := reconcileDurations(a, v1alpha1.PackageKind, reader)
		assert.Equal(a, readerBefore+1, n, "one reconcile for one change")
	})

	// Status churn: a condition pkgsync does not gate on, and a field it does not read.
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(hc), hc))
	conds, _, _ := unstructured.NestedSlice(hc.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "",
		"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")})
	require.NoError(t, unstructured.SetNestedSlice(hc.Object, conds, "status", "conditions"))
	require.NoError(t, unstructured.SetNestedField(hc.Object, "v1.36.3", "status", "version", "desired", "release", "version"))
	require.NoError(t, suite.mgmtClient.Status().Update(t.Context(), hc))

	relabel("platinum")
	eventually(t, func(a *attempt) {
		assert.Equal(a, "platinum", configMapData(a, hcp, "tier")["tier"])
		n, _ := reconcileDurations(a, v1alpha1.PackageKind, reader)
		assert.Equal(a, readerBefore+2, n, "one reconcile per label change, none for status")
	})
	n, _ := reconcileDurations(t, v1alpha1.PackageKind, other)
	assert.Equal(t, otherBefore, n, "the Package that does not read its HostedCluster is not woken")
}

// waitForReadyRecorded waits until the shared controller has recorded obj as Ready in its
// metrics, which it does after it records the reconcile's duration: reconcileDurations then
// counts every reconcile up to the one that made obj Ready.
func waitForReadyRecorded(t *testing.T, obj client.Object) {
	t.Helper()
	eventually(t, func(a *attempt) {
		families, err := suite.reconcileMetrics.Gather()
		if !assert.NoError(a, err) {
			return
		}
		var ready float64
		for _, f := range families {
			if f.GetName() != "gotk_reconcile_condition" {
				continue
			}
			for _, m := range f.GetMetric() {
				if hasLabels(m, map[string]string{"namespace": obj.GetNamespace(), "name": obj.GetName(), "type": "Ready", "status": "True"}) {
					ready = m.GetGauge().GetValue()
				}
			}
		}
		assert.Equal(a, 1.0, ready, "Ready recorded")
	})
}
