package apply_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

func TestPruneAfterARevisionDropsObjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	keep := e.configMap(t, "keep", nil)
	drop := e.configMap(t, "drop", nil)
	released := e.configMap(t, "released", nil)
	hostedDrop := e.configMap(t, "hosted-drop", nil)
	rev1 := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{
		{Name: "one", Objects: []*unstructured.Unstructured{keep, drop, released}},
		{Name: "two", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{hostedDrop}},
	}}
	res := applyUntilComplete(t, engine, rev1)
	require.Equal(t, 4, res.Inventory.Len())

	// Someone takes "released" over by removing pkgsync's labels: prune must leave it.
	live, _ := get(t, e.mgmt, released)
	live.SetLabels(nil)
	require.NoError(t, e.mgmt.Update(t.Context(), live))

	rev2 := apply.Request{Owner: e.owner, Targets: e.targets, Previous: res.Inventory, Phases: []desired.Phase{
		{Name: "one", Objects: []*unstructured.Unstructured{keep}},
	}}
	res, err := engine.Apply(t.Context(), rev2)
	require.NoError(t, err)
	require.True(t, res.Complete())
	assert.Equal(t, 2, res.Pruned)

	_, ok := get(t, e.mgmt, keep)
	assert.True(t, ok)
	_, ok = get(t, e.mgmt, drop)
	assert.False(t, ok)
	_, ok = get(t, e.hosted, hostedDrop)
	assert.False(t, ok)
	_, ok = get(t, e.mgmt, released)
	assert.True(t, ok, "an object that lost the owner's labels is not pruned")
	assert.Equal(t, apply.Inventory{Phases: []apply.InventoryPhase{{Name: "one", Objects: []apply.ObjectRef{apply.RefOf(keep)}}}}, res.Inventory)
}

func TestPruneWaitsForTheNewRevisionToComplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	old := e.configMap(t, "old", nil)
	res := applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{old}}}})

	res, err := engine.Apply(t.Context(), apply.Request{Owner: e.owner, Targets: e.targets, Previous: res.Inventory,
		Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{e.obj(t, deploymentYAML)}}}})
	require.NoError(t, err)
	require.False(t, res.Complete())
	_, ok := get(t, e.mgmt, old)
	assert.True(t, ok, "prune must wait until the new revision is complete")
	assert.Equal(t, 2, res.Inventory.Len(), "the inventory keeps the old object until it is pruned")
}
