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

func TestTeardownGoesInReversePhaseOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	first := e.configMap(t, "first", nil)
	second := e.configMap(t, "second", nil)
	second.SetFinalizers([]string{"test.pkgsync.dev/hold"})
	res := applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{
		{Name: "one", Objects: []*unstructured.Unstructured{first}},
		{Name: "two", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{second}},
	}})

	treq := apply.TeardownRequest{Owner: e.owner, Targets: e.targets, Inventory: res.Inventory}
	tres, err := engine.Teardown(t.Context(), treq)
	require.NoError(t, err)
	assert.False(t, tres.Done())
	assert.Equal(t, "two", tres.Phase)
	assert.Equal(t, []apply.ObjectRef{apply.RefOf(second)}, tres.Remaining)
	live, ok := get(t, e.mgmt, first)
	require.True(t, ok)
	assert.Nil(t, live.GetDeletionTimestamp(), "phase one is untouched while phase two is not gone")

	// A second pass while the finalizer holds changes nothing.
	tres, err = engine.Teardown(t.Context(), apply.TeardownRequest{Owner: e.owner, Targets: e.targets, Inventory: tres.Inventory})
	require.NoError(t, err)
	assert.Equal(t, "two", tres.Phase)
	_, ok = get(t, e.mgmt, first)
	require.True(t, ok)

	held, _ := get(t, e.hosted, second)
	held.SetFinalizers(nil)
	require.NoError(t, e.hosted.Update(t.Context(), held))

	tres, err = engine.Teardown(t.Context(), apply.TeardownRequest{Owner: e.owner, Targets: e.targets, Inventory: tres.Inventory})
	require.NoError(t, err)
	assert.True(t, tres.Done())
	_, ok = get(t, e.mgmt, first)
	assert.False(t, ok)
}

func TestTeardownLeavesObjectsOfOtherOwners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	cm := e.configMap(t, "kept", nil)
	res := applyUntilComplete(t, engine, apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{cm}}}})
	live, _ := get(t, e.mgmt, cm)
	live.SetLabels(map[string]string{"kept-by": "hand"})
	require.NoError(t, e.mgmt.Update(t.Context(), live))

	tres, err := engine.Teardown(t.Context(), apply.TeardownRequest{Owner: e.owner, Targets: e.targets, Inventory: res.Inventory})
	require.NoError(t, err)
	assert.True(t, tres.Done())
	_, ok := get(t, e.mgmt, cm)
	assert.True(t, ok)
}
