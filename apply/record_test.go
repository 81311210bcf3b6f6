package apply_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// TestRecordBeforeFirstWrite: the caller is told what a pass will create before it creates it,
// so a crash between a write and storing the result cannot orphan an object.
func TestRecordBeforeFirstWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	first := e.configMap(t, "first", nil)
	second := e.configMap(t, "second", nil)
	noNamespace := e.configMap(t, "defaulted", nil)
	noNamespace.SetNamespace("")

	var recorded []apply.Inventory
	record := func(_ context.Context, inv apply.Inventory) error {
		// Nothing of what is recorded for the first time exists yet.
		for _, ph := range inv.Phases {
			for _, ref := range ph.Objects {
				if len(recorded) == 0 || !contains(recorded[len(recorded)-1], ref) {
					like := &unstructured.Unstructured{}
					like.SetGroupVersionKind(ref.GroupVersionKind())
					like.SetNamespace(ref.Namespace)
					like.SetName(ref.Name)
					c := e.mgmt
					if ph.Class == v1alpha1.ClassHostedCluster {
						c = e.hosted
					}
					_, ok := get(t, c, like)
					assert.False(t, ok, "%s is recorded before it is written", ref)
				}
			}
		}
		recorded = append(recorded, inv)
		return nil
	}
	req := apply.Request{Owner: e.owner, Targets: e.targets, DefaultNamespace: e.ns, Record: record, Phases: []desired.Phase{
		{Name: "one", Objects: []*unstructured.Unstructured{first, noNamespace}},
		{Name: "two", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{second}},
	}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	require.True(t, res.Complete())
	require.Len(t, recorded, 2, "once per phase that creates objects")
	assert.Equal(t, res.Inventory, recorded[1], "the last record is what the pass made true")
	assert.Equal(t, e.ns, recorded[0].Phases[0].Objects[1].Namespace, "recorded with the namespace the API server uses")

	// A no-op pass records nothing, so it still writes nothing.
	req.Previous = res.Inventory
	_, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Len(t, recorded, 2)

	// A failing record stops the pass before the write.
	third := e.configMap(t, "third", nil)
	req.Phases[0].Objects = append(req.Phases[0].Objects, third)
	req.Record = func(context.Context, apply.Inventory) error { return errors.New("status patch refused") }
	_, err = engine.Apply(t.Context(), req)
	require.ErrorContains(t, err, "status patch refused")
	_, ok := get(t, e.mgmt, third)
	assert.False(t, ok)
}

func contains(inv apply.Inventory, ref apply.ObjectRef) bool {
	for _, ph := range inv.Phases {
		for _, r := range ph.Objects {
			if r == ref {
				return true
			}
		}
	}
	return false
}
