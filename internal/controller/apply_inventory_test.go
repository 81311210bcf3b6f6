package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
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
