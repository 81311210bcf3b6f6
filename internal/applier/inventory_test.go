package applier

import (
	"fmt"
	"testing"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

func TestInventoryRoundTrip(t *testing.T) {
	t.Parallel()
	inv := apply.Inventory{Phases: []apply.InventoryPhase{
		{Name: "rbac", Class: v1alpha1.ClassHostedCluster, Objects: []apply.ObjectRef{
			{Version: "v1", Kind: "Namespace", Name: "addon"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "addon"},
		}},
		{Name: "deploy", Objects: []apply.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Name: "op"}}},
	}}
	inv.Phases[1].Objects = append(inv.Phases[1].Objects,
		apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Name: "op2"},
		apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "clusters-a", Name: "c"},
		apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Name: "op3"})
	stored := inventoryToStatus(inv)
	assert.Equal(t, []v1alpha1.InventoryGroup{
		{Version: "v1", Kind: "Namespace", Names: []string{"addon"}},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Names: []string{"addon"}},
	}, stored.Phases[0].Groups)
	assert.Equal(t, []v1alpha1.InventoryGroup{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Names: []string{"op", "op2"}},
		{Version: "v1", Kind: "ConfigMap", Namespace: "clusters-a", Names: []string{"c"}},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Names: []string{"op3"}},
	}, stored.Phases[1].Groups, "runs of one kind and namespace, in order")
	assert.Empty(t, stored.Phases[0].Objects)
	back, err := inventoryFromStatus(stored)
	require.NoError(t, err)
	assert.Equal(t, inv, back)

	// The format of earlier versions, one string per object, is read as it was.
	old := &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{
		{Name: "rbac", Class: v1alpha1.ClassHostedCluster, Objects: []string{"/v1/Namespace//addon", "rbac.authorization.k8s.io/v1/ClusterRole//addon"}},
		{Name: "deploy", Objects: []string{"apps/v1/Deployment/clusters-a/op", "apps/v1/Deployment/clusters-a/op2", "/v1/ConfigMap/clusters-a/c", "apps/v1/Deployment/clusters-a/op3"}},
	}}
	back, err = inventoryFromStatus(old)
	require.NoError(t, err)
	assert.Equal(t, inv, back)

	assert.Nil(t, inventoryToStatus(apply.Inventory{}))
	_, err = inventoryFromStatus(&v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{{Name: "x", Objects: []string{"not-an-id"}}}})
	assert.ErrorContains(t, err, "not-an-id")
}

// TestLargeInventoryGroups: a pass records the inventory of a 5000-object package (the report's
// record hook, before the first write) as one group per run of one kind in one namespace, the
// form whose size on a real API server test/e2e's TestInventoryOnAPIServer measures, and the
// next pass reads it back.
func TestLargeInventoryGroups(t *testing.T) {
	t.Parallel()
	const ns = "clusters-production-hosted-0001"
	setup := apply.InventoryPhase{Name: "setup", Objects: []apply.ObjectRef{
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "configurations.addons.example.com"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "addon-operator"},
		{Version: "v1", Kind: "ServiceAccount", Namespace: ns, Name: "addon-operator"},
	}}
	deploy := apply.InventoryPhase{Name: "deploy", Objects: []apply.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "addon-operator"}}}
	config := apply.InventoryPhase{Name: "configure", Class: v1alpha1.ClassHostedCluster}
	var names []string
	for i := range 4996 {
		name := fmt.Sprintf("addon-operator-managed-configuration-%05d", i)
		names = append(names, name)
		config.Objects = append(config.Objects, apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name})
	}
	inv := apply.Inventory{Phases: []apply.InventoryPhase{setup, deploy, config}}

	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "large", Finalizers: []string{v1alpha1.FinalizerName}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pkg).WithStatusSubresource(pkg).Build()
	rep := reconciler.BeginReport(c, pkg, ApplyCommon(&pkg.Status.ApplyStatus), runtimectrl.Metrics{}, nil)
	require.NoError(t, RecordInventory(rep, &pkg.Status.ApplyStatus)(t.Context(), inv))

	var got v1alpha1.Package
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got))
	assert.Equal(t, &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{
		{Name: "setup", Groups: []v1alpha1.InventoryGroup{
			{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Names: []string{"configurations.addons.example.com"}},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Names: []string{"addon-operator"}},
			{Version: "v1", Kind: "ServiceAccount", Namespace: ns, Names: []string{"addon-operator"}},
		}},
		{Name: "deploy", Groups: []v1alpha1.InventoryGroup{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Names: []string{"addon-operator"}}}},
		{Name: "configure", Class: v1alpha1.ClassHostedCluster, Groups: []v1alpha1.InventoryGroup{{Version: "v1", Kind: "ConfigMap", Namespace: ns, Names: names}}},
	}}, got.Status.Inventory)
	back, err := inventoryFromStatus(got.Status.Inventory)
	require.NoError(t, err)
	assert.Equal(t, inv, back)
}

// TestInventoryKeepsJobRuns: the records of the Jobs that ran (issue 42: a Job the
// TTL-after-finished controller deleted is not run again in the same desired state) go to
// status and come back, so that a restarted controller does not run them again.
func TestInventoryKeepsJobRuns(t *testing.T) {
	t.Parallel()
	runs := []v1alpha1.InventoryJob{
		{Namespace: "clusters-a", Name: "migrate", DesiredHash: "0123", Outcome: v1alpha1.JobComplete},
		{Namespace: "clusters-a", Name: "seed", DesiredHash: "4567"},
	}
	inv := apply.Inventory{Phases: []apply.InventoryPhase{{Name: "migrate", Objects: []apply.ObjectRef{
		{Group: "batch", Version: "v1", Kind: "Job", Namespace: "clusters-a", Name: "migrate"},
		{Group: "batch", Version: "v1", Kind: "Job", Namespace: "clusters-a", Name: "seed"},
	}, Jobs: runs}}}
	stored := inventoryToStatus(inv)
	assert.Equal(t, runs, stored.Phases[0].Jobs)
	back, err := inventoryFromStatus(stored)
	require.NoError(t, err)
	assert.Equal(t, inv, back)
}
