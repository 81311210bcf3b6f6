package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// largeInventory is, in the form the controller stores it (one group per run of objects of one
// kind in one namespace: internal/controller's TestInventoryRoundTrip and TestLargeInventoryGroups
// hold it to that), the inventory of a package of n objects in namespace, spread over three
// phases the way an add-on's are: RBAC and CRDs first, the operator, then n ConfigMaps (their
// names as long as an operator's usually are).
func largeInventory(namespace string, n int) *v1alpha1.Inventory {
	setup := v1alpha1.InventoryPhase{Name: "setup", Groups: []v1alpha1.InventoryGroup{
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Names: []string{"configurations.addons.example.com"}},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Names: []string{"addon-operator"}},
		{Version: "v1", Kind: "ServiceAccount", Namespace: namespace, Names: []string{"addon-operator"}},
	}}
	deploy := v1alpha1.InventoryPhase{Name: "deploy", Groups: []v1alpha1.InventoryGroup{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: namespace, Names: []string{"addon-operator"}},
	}}
	configMaps := v1alpha1.InventoryGroup{Version: "v1", Kind: "ConfigMap", Namespace: namespace}
	for i := range n - 4 {
		configMaps.Names = append(configMaps.Names, fmt.Sprintf("addon-operator-managed-configuration-%05d", i))
	}
	config := v1alpha1.InventoryPhase{Name: "configure", Class: v1alpha1.ClassHostedCluster, Groups: []v1alpha1.InventoryGroup{configMaps}}
	return &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{setup, deploy, config}}
}

// TestInventoryOnAPIServer: the inventory a Package stores fits on a real API server, and one
// an earlier version stored (one string per object) is read and written anew by the controller.
func TestInventoryOnAPIServer(t *testing.T) {
	t.Parallel()
	large, earlier := newNamespace(t), newNamespace(t)

	// The Package as the API server stores and serves it stays far below the 1.5 MiB limit of
	// an object with a 5000-object inventory. No controller watches the shard: the status is
	// the test's.
	t.Run("a package of 5000 objects", func(t *testing.T) {
		t.Parallel()
		const objects, limit = 5000, 1 << 20
		ns := large
		pkg := newPackage(ns, "large", "registry.example.com/addons/addon:v1", "")
		pkg.Labels = map[string]string{shardLabel: "inventory-size"}
		createPackage(t, pkg)
		inv := largeInventory(ns, objects)
		pkg.Status.Inventory = inv.DeepCopy()
		require.NoError(t, suite.mgmtClient.Status().Update(t.Context(), pkg))

		raw := getRaw(t, suite.mgmt.Config, "/apis/pkgsync.dev/v1alpha1/namespaces/"+ns+"/packages/large")
		t.Logf("a Package with an inventory of %d objects is %d bytes as served", objects, len(raw))
		assert.Less(t, len(raw), limit, "the Package with an inventory of %d objects", objects)
		var back v1alpha1.Package
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), &back))
		assert.Equal(t, inv, back.Status.Inventory)
	})

	// A Package whose status an earlier version wrote (one string per object) is read as it
	// was: an object only that inventory holds is pruned. The pass then writes groups in its
	// place.
	t.Run("an inventory of an earlier version", func(t *testing.T) {
		t.Parallel()
		ns := earlier
		image := suite.registry.Host + "/e2e/" + ns + "/cms:v1"
		pushPackage(t, writePackage(t, configMapsPackage("", nil, "kept", "dropped")), "e2e/"+ns+"/cms:v1")
		pkg := newPackage(ns, "cms", image, "")
		createPackage(t, pkg)
		eventually(t, func(a *attempt) {
			ready := readyCondition(a, pkg)
			if assert.NotNil(a, ready) {
				assert.Equal(a, v1alpha1.ReconciliationSucceededReason, ready.Reason)
			}
		}, "the Package converges")
		require.NotNil(t, pkg.Status.Inventory)

		// The package drops an object, and the status is as an earlier version wrote it (a status
		// write wakes no reconcile: the request below does).
		pushPackage(t, writePackage(t, configMapsPackage("", nil, "kept")), "e2e/"+ns+"/cms:v1")
		patch := client.MergeFrom(pkg.DeepCopy())
		pkg.Status.Inventory = &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{{Name: "config", Objects: []string{
			"/v1/ConfigMap/" + ns + "/kept", "/v1/ConfigMap/" + ns + "/dropped",
		}}}}
		require.NoError(t, suite.mgmtClient.Status().Patch(t.Context(), pkg, patch))
		waitForHandledRequest(t, pkg)

		eventually(t, func(a *attempt) {
			err := suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: "dropped"}, &corev1.ConfigMap{})
			assert.True(a, apierrors.IsNotFound(err), "the object only the earlier inventory holds is pruned: %v", err)
			readyCondition(a, pkg)
			if assert.NotNil(a, pkg.Status.Inventory) && assert.Len(a, pkg.Status.Inventory.Phases, 1) {
				ph := pkg.Status.Inventory.Phases[0]
				assert.Empty(a, ph.Objects, "phase %s is written as groups", ph.Name)
				assert.Equal(a, []v1alpha1.InventoryGroup{{Version: "v1", Kind: "ConfigMap", Namespace: ns, Names: []string{"kept"}}}, ph.Groups)
			}
		}, "the earlier inventory is read and written anew")
		assert.Equal(t, "kept", configMapData(t, ns, "kept")["name"])
	})
}

// getRaw reads path from the API server as JSON, as stored and served.
func getRaw(t *testing.T, cfg *rest.Config, path string) []byte {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	require.NoError(t, err)
	raw, err := rc.Get().AbsPath(path).SetHeader("Accept", "application/json").DoRaw(t.Context())
	require.NoError(t, err)
	return raw
}
