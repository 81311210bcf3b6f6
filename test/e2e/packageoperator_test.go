package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestPackageOperatorPackageInHCPNamespace installs a component of a multi-component Package
// Operator package (testdata/pko-shop) into a hosted-control-plane namespace of a labelled
// HostedCluster: CEL conditions, a locked image, constraints, a hosted-cluster phase and
// templates reading the HostedCluster, unchanged.
func TestPackageOperatorPackageInHCPNamespace(t *testing.T) {
	hc, hcp := newHostedCluster(t, true)
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(hc), hc))
	hc.SetLabels(map[string]string{"example.com/team": "payments"})
	hc.SetAnnotations(map[string]string{"example.com/owner": "alice"})
	require.NoError(t, unstructured.SetNestedStringMap(hc.Object, map[string]string{"node-role.kubernetes.io/infra": ""}, "spec", "nodeSelector"))
	require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))

	pushPackage(t, "testdata/pko-shop", "e2e/pko-shop:v1")
	image := suite.registry.Host + "/e2e/pko-shop:v1"
	pkg := newPackage(hcp, "shop", image, "")
	pkg.Spec.Component = "addon"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))

	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "shop-payments"), "the hosted phase, named from the HostedCluster's label")
	data := configMapData(t, hcp, "shop-addon")
	assert.Equal(t, map[string]string{
		"image":         "quay.io/example/shop-api@sha256:3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d",
		"hostedCluster": hc.GetNamespace() + "/guest",
		"hcpNamespace":  hcp,
		"owner":         "alice",
		"nodeSelector":  `{"node-role.kubernetes.io/infra":""}`,
	}, data)
	addon := &unstructured.Unstructured{}
	addon.SetAPIVersion("v1")
	addon.SetKind("ConfigMap")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: hcp, Name: "shop-addon"}, addon))
	assert.NotContains(t, addon.GetAnnotations(), "package-operator.run/condition", "the condition annotation is not applied")
	for _, l := range []string{"package-operator.run/package", "package-operator.run/instance"} {
		assert.NotContains(t, addon.GetLabels(), l, "Package Operator's labels are not added")
	}
	assert.Equal(t, "shop", addon.GetLabels()[ownerLabel], "pkgsync's ownership labels are")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-debug"), "its condition is false")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-metrics"), "left out by the path filter")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-root"), "the root component is not installed")

	// uniqueInScope: a second installation of the package in the namespace applies nothing.
	second := newPackage(hcp, "shop-again", image, `{"monitoring": true}`)
	second.Spec.Component = "addon"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), second))
	cond := waitForReady(t, second, metav1.ConditionFalse, v1alpha1.UniqueInScopeConstraintViolatedReason)
	assert.Contains(t, cond.Message, "Package "+hcp+"/shop already installs")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-metrics"), "nothing of the second installation is applied")

	// platformVersion: a component needing a Kubernetes release that does not exist.
	future := newPackage(hcp, "future", image, "")
	future.Spec.Component = "future"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), future))
	cond = waitForReady(t, future, metav1.ConditionFalse, v1alpha1.PlatformVersionConstraintViolatedReason)
	assert.Contains(t, cond.Message, "spec.constraints[0].platformVersion not met: the package needs Kubernetes >=99")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-future"))

	for _, p := range []*v1alpha1.Package{future, second, pkg} {
		require.NoError(t, suite.mgmtClient.Delete(t.Context(), p))
	}
	eventually(t, func(a *attempt) {
		for _, p := range []*v1alpha1.Package{future, second, pkg} {
			err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(p), &v1alpha1.Package{})
			assert.True(a, apierrors.IsNotFound(err), "Package %s still there: %v", p.Name, err)
		}
		finalizeNamespace(a, suite.hosted.Config, "shop-payments")
	})
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-addon"))
}
