package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// aggregatedRolePackage is a ClusterRole written as the Kubernetes documentation writes an
// aggregated one (aggregationRule and rules: []), and a ClusterRole it aggregates.
func aggregatedRolePackage(name string) map[string]string {
	return map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: roles\nspec:\n  scopes: [Cluster]\n  phases:\n  - name: rbac\n",
		"roles.yaml": fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[1]s
  annotations:
    pkgsync.dev/phase: rbac
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      e2e.pkgsync.dev/aggregate-to: %[1]s
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[1]s-configmaps
  labels:
    e2e.pkgsync.dev/aggregate-to: %[1]s
  annotations:
    pkgsync.dev/phase: rbac
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
`, name),
	}
}

// TestRealClusterAggregatedClusterRole: the aggregation controller writes an aggregated
// ClusterRole's rules; pkgsync leaves them to it. The ClusterPackage is Ready and stays so
// across reconciles, and the rules are the aggregated ones, not the package's empty list.
func TestRealClusterAggregatedClusterRole(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	name := fmt.Sprintf("e2e-aggregated-%d", nsCounter.Add(1))
	image := suite.registry.Host + "/e2e/cluster/" + name + ":v1"
	pushPackageTo(t, writePackage(t, aggregatedRolePackage(name)), image)
	cp := &v1alpha1.ClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.PackageSpec{Image: image, Interval: &metav1.Duration{Duration: 2 * time.Second}},
	}
	env.create(t, cp)
	env.ready(t, cp, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "")

	eventuallyFor(t, t.Context(), clusterTimeout, func(a *attempt) {
		var role rbacv1.ClusterRole
		if assert.NoError(a, env.client.Get(a.Context(), client.ObjectKey{Name: name}, &role)) && assert.Len(a, role.Rules, 1) {
			assert.Equal(a, []string{"configmaps"}, role.Rules[0].Resources, "the aggregation controller's rules")
		}
	}, "the aggregation controller fills the rules")
	// Reconciles on the 2 s interval keep it Ready: no Conflict with the aggregation controller.
	eventuallyFor(t, t.Context(), clusterTimeout, func(a *attempt) {
		if !assert.NoError(a, env.client.Get(a.Context(), clientKey(cp), cp)) {
			return
		}
		var readyAt *metav1.Condition
		for i := range cp.Status.Conditions {
			if cp.Status.Conditions[i].Type == "Ready" {
				readyAt = &cp.Status.Conditions[i]
			}
		}
		if assert.NotNil(a, readyAt) {
			assert.Equal(a, metav1.ConditionTrue, readyAt.Status, readyAt.Message)
			assert.GreaterOrEqual(a, time.Since(readyAt.LastTransitionTime.Time), 6*time.Second, "Ready for three intervals")
		}
	}, "the ClusterPackage stays Ready")
}
