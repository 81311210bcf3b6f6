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

// TestSameObjectOnBothClusters: one package holds a ConfigMap of the same namespace and name for
// the management and for the hosted cluster. They are two objects: both are tracked, pruned and
// torn down.
func TestSameObjectOnBothClusters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	twin := e.configMap(t, "twin", map[string]string{"a": "1"})
	keep := e.configMap(t, "keep", nil)
	res := applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{
		{Name: "mgmt", Objects: []*unstructured.Unstructured{twin, keep}},
		{Name: "hosted", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{twin}},
	}})
	assert.Equal(t, 3, res.Inventory.Len(), "both copies are in the inventory: %+v", res.Inventory)

	// The next revision drops the twin from both phases: both copies are pruned.
	next := apply.Request{Owner: e.owner, Targets: e.targets, Previous: res.Inventory, Phases: []desired.Phase{
		{Name: "mgmt", Objects: []*unstructured.Unstructured{keep}},
		{Name: "hosted", Class: v1alpha1.ClassHostedCluster},
	}}
	res = applyUntilComplete(t, engine, next)
	_, onMgmt := get(t, e.mgmt, twin)
	_, onHosted := get(t, e.hosted, twin)
	assert.False(t, onMgmt, "pruned from the management cluster")
	assert.False(t, onHosted, "pruned from the hosted cluster")
	assert.Equal(t, 1, res.Inventory.Len())

	// Back again, then deleted: teardown removes both copies.
	res = applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Previous: res.Inventory, Phases: []desired.Phase{
		{Name: "mgmt", Objects: []*unstructured.Unstructured{twin}},
		{Name: "hosted", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{twin}},
	}})
	tres, err := engine.Teardown(t.Context(), apply.TeardownRequest{Owner: e.owner, Targets: e.targets, Inventory: res.Inventory})
	require.NoError(t, err)
	for !tres.Done() {
		tres, err = engine.Teardown(t.Context(), apply.TeardownRequest{Owner: e.owner, Targets: e.targets, Inventory: tres.Inventory})
		require.NoError(t, err)
	}
	_, onMgmt = get(t, e.mgmt, twin)
	_, onHosted = get(t, e.hosted, twin)
	assert.False(t, onMgmt, "torn down on the management cluster")
	assert.False(t, onHosted, "torn down on the hosted cluster")
}

// TestObjectMovesBetweenClusters: an object that moves from a management phase to a hosted phase
// (and back) is created on the new cluster and pruned from the old one.
func TestObjectMovesBetweenClusters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	moving := e.configMap(t, "moving", nil)
	onMgmt := func(objs ...*unstructured.Unstructured) []desired.Phase {
		return []desired.Phase{{Name: "mgmt", Objects: objs}, {Name: "hosted", Class: v1alpha1.ClassHostedCluster}}
	}
	onHosted := func(objs ...*unstructured.Unstructured) []desired.Phase {
		return []desired.Phase{{Name: "mgmt"}, {Name: "hosted", Class: v1alpha1.ClassHostedCluster, Objects: objs}}
	}
	res := applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Phases: onMgmt(moving)})

	res = applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Previous: res.Inventory, Phases: onHosted(moving)})
	_, ok := get(t, e.mgmt, moving)
	assert.False(t, ok, "the old copy on the management cluster is pruned")
	_, ok = get(t, e.hosted, moving)
	assert.True(t, ok)
	require.Len(t, res.Inventory.Phases, 1)
	assert.Equal(t, v1alpha1.ClassHostedCluster, res.Inventory.Phases[0].Class)

	res = applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Previous: res.Inventory, Phases: onMgmt(moving)})
	_, ok = get(t, e.hosted, moving)
	assert.False(t, ok, "and back: the hosted copy is pruned")
	_, ok = get(t, e.mgmt, moving)
	assert.True(t, ok)
	require.Len(t, res.Inventory.Phases, 1)
	assert.Equal(t, "", res.Inventory.Phases[0].Class)
}
