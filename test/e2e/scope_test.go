package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// clusterWidePackage creates a namespace and a ConfigMap in it: fine for a ClusterPackage, out
// of bounds for a namespaced Package.
func clusterWidePackage(ns string) map[string]string {
	return map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: wide\nspec:\n  phases:\n  - name: namespace\n  - name: config\n",
		"objects.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: ` + ns + `
  annotations:
    pkgsync.dev/phase: namespace
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: wide
  namespace: ` + ns + `
  annotations:
    pkgsync.dev/phase: config
data:
  scope: cluster
`,
	}
}

func TestClusterPackage(t *testing.T) {
	t.Parallel()
	// Names of its own, the namespace it creates and the ClusterPackage: tests run in parallel.
	target := fmt.Sprintf("e2e-cluster-wide-%d", nsCounter.Add(1))
	pushPackage(t, writePackage(t, clusterWidePackage(target)), "e2e/"+target+"/wide:v1")
	cp := &v1alpha1.ClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec:       v1alpha1.PackageSpec{Image: suite.registry.Host + "/e2e/" + target + "/wide:v1", Interval: &metav1.Duration{Duration: time.Hour}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), cp))
	t.Cleanup(func() { deleteAndWait(t, cp) })
	waitForReady(t, cp, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "wide"))

	require.NoError(t, suite.mgmtClient.Delete(t.Context(), cp))
	eventually(t, func(a *attempt) {
		finalizeNamespace(a, suite.mgmt.Config, target)
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(cp), cp)
		assert.True(a, apierrors.IsNotFound(err), "ClusterPackage still there: %v", err)
	})
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "wide"))
}

func TestNamespacedPackageStaysInItsNamespace(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pushPackage(t, writePackage(t, clusterWidePackage("e2e-elsewhere")), "e2e/"+ns+"/wide:v1")
	pkg := newPackage(ns, "wide", suite.registry.Host+"/e2e/"+ns+"/wide:v1", "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.ScopeViolationReason)
	assert.Contains(t, cond.Message, "Namespace e2e-elsewhere (cluster-scoped)")
	assert.Contains(t, cond.Message, "ClusterPackage")
	assert.NotNil(t, apimeta.FindStatusCondition(pkg.Status.Conditions, meta.StalledCondition))
	assert.False(t, exists(t, suite.mgmtClient, "v1", "Namespace", "", "e2e-elsewhere"), "nothing is applied")
}
