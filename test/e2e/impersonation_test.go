package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestServiceAccountLimitsPackage: with spec.serviceAccountName, writes to the management
// cluster are made as that ServiceAccount, so its RBAC bounds the package.
func TestServiceAccountLimitsPackage(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}}))
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), role))
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}},
	}))

	pushPackage(t, writePackage(t, appPackage), "e2e/"+ns+"/app:v1")
	pkg := newPackage(ns, "app", suite.registry.Host+"/e2e/"+ns+"/app:v1", "")
	pkg.Spec.ServiceAccountName = "deployer"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))

	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.ForbiddenReason)
	assert.Contains(t, cond.Message, "system:serviceaccount:"+ns+":deployer")
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-config"), "what the ServiceAccount may do is done")
	assert.False(t, exists(t, suite.mgmtClient, "apps/v1", "Deployment", ns, "app"), "what it may not do is not")

	require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(role), role))
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}})
	require.NoError(t, suite.mgmtClient.Update(t.Context(), role))
	eventually(t, func(a *attempt) {
		assert.True(a, exists(a, suite.mgmtClient, "apps/v1", "Deployment", ns, "app"), "Deployment applied once the Role allows it")
	})
}
