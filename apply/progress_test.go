package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// TestRetriesReadOnlyWhatIsNotAvailable: while a package waits on a Deployment, the passes that
// follow read the Deployment only, not the objects an earlier pass found available, and the
// object of the last phase, recorded by the first pass, is created without a read; an object
// whose desired state changed, or whose conditions are mapped, is read all the same; once every
// phase is complete, the memory is gone and the next pass reads every object (drift is found as
// before).
func TestRetriesReadOnlyWhatIsNotAvailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg, counter := countingConfig(management.Config)
	e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
	engine := apply.NewEngine(apply.Options{})
	progress := apply.NewProgress()

	var config []*unstructured.Unstructured
	for i := range 4 {
		config = append(config, e.configMap(t, fmt.Sprintf("config-%d", i), map[string]string{"n": "1"}))
	}
	records := 0
	req := apply.Request{Owner: e.owner, Targets: e.targets, Progress: progress, Record: func(context.Context, apply.Inventory) error { records++; return nil }, Phases: []desired.Phase{
		{Name: "config", Objects: config},
		{Name: "deploy", Objects: []*unstructured.Unstructured{e.configMap(t, "beside", nil), e.obj(t, deploymentYAML)}},
		{Name: "after", Objects: []*unstructured.Unstructured{e.configMap(t, "after", nil)}},
	}}
	pass := func() (*apply.Result, map[string]int) {
		t.Helper()
		counter.reset()
		res, err := engine.Apply(t.Context(), req)
		require.NoError(t, err)
		req.Previous = res.Inventory
		return res, counter.reset()
	}

	res, counts := pass()
	require.False(t, res.Complete())
	assert.Equal(t, "deploy", res.Progressing().Name)
	assert.Equal(t, 6, counts[http.MethodPatch], "the first pass creates the objects of the first two phases")
	assert.Equal(t, 5, progress.Available(), "the ConfigMaps are remembered available, the Deployment is not")
	assert.Equal(t, 1, records, "the objects of every phase are recorded once, before the first write")

	for range 3 {
		res, counts = pass()
		require.False(t, res.Complete())
		assert.Equal(t, 1, counts[http.MethodGet], "a retry reads the Deployment only")
		assert.Zero(t, counts[http.MethodPatch], "and writes nothing")
		assert.Equal(t, 7, res.Inventory.Len(), "the objects not read stay in the inventory, and so does the one not sent yet")
	}

	// A new desired state of a remembered object is applied, not skipped.
	config[1].Object["data"] = map[string]any{"n": "2"}
	res, counts = pass()
	require.False(t, res.Complete())
	assert.Equal(t, 2, counts[http.MethodGet], "the changed ConfigMap and the Deployment")
	assert.Equal(t, 1, counts[http.MethodPatch], "the changed ConfigMap is applied")
	live, _ := get(t, e.mgmt, config[1])
	assert.Equal(t, map[string]any{"n": "2"}, live.Object["data"])

	// Another request (here: adoption allowed) judges objects anew.
	req.Adopt = "Always"
	_, counts = pass()
	assert.Equal(t, 6, counts[http.MethodGet], "every object is read under a changed request")
	req.Adopt = ""
	_, counts = pass()
	assert.Equal(t, 6, counts[http.MethodGet], "and again when it changes back")
	_, counts = pass()
	assert.Equal(t, 1, counts[http.MethodGet], "then the Deployment only")

	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	res, counts = pass()
	require.True(t, res.Complete(), res.Summary())
	assert.Equal(t, 1, counts[http.MethodGet], "the Deployment; the last phase's ConfigMap, recorded but never sent, is not read first")
	assert.Equal(t, 1, counts[http.MethodPatch], "the last phase's ConfigMap is created")
	assert.Equal(t, 1, records, "recorded once in all")
	assert.Zero(t, progress.Available(), "what was found available is forgotten once complete")

	res, counts = pass()
	require.True(t, res.Complete())
	assert.Equal(t, 7, counts[http.MethodGet], "a converged owner's pass reads every object")
	assert.Zero(t, counts[http.MethodPatch])
}

// TestObjectsWithMappedConditionsAreReadOnRetries: an object whose conditions a phase maps is
// read on every pass, so that the mapped conditions stay reported while the package waits.
func TestObjectsWithMappedConditionsAreReadOnRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg, counter := countingConfig(management.Config)
	e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
	engine := apply.NewEngine(apply.Options{})
	req := apply.Request{Owner: e.owner, Targets: e.targets, Progress: apply.NewProgress(), Phases: []desired.Phase{
		{Name: "config", Objects: []*unstructured.Unstructured{e.configMap(t, "mapped", nil), e.configMap(t, "plain", nil)},
			ConditionMappings: []desired.ConditionMapping{{Object: 0, Source: "Ready", Destination: "example.com/Ready"}}},
		{Name: "deploy", Objects: []*unstructured.Unstructured{e.obj(t, deploymentYAML)}},
	}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	req.Previous = res.Inventory
	counter.reset()
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	require.False(t, res.Complete())
	assert.Equal(t, 2, counter.reset()[http.MethodGet], "the mapped ConfigMap and the Deployment")
}
