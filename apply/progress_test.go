package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// progressEnv is a package of three phases (four ConfigMaps; a ConfigMap and a Deployment that
// keeps the package waiting; a last ConfigMap) applied with an apply.Progress through a client
// that counts its requests.
type progressEnv struct {
	*env
	engine   *apply.Engine
	progress *apply.Progress
	counter  *countingTransport
	req      apply.Request
	config   []*unstructured.Unstructured
	records  int
}

func newProgressEnv(t *testing.T, maxAge time.Duration) *progressEnv {
	t.Helper()
	e := &progressEnv{env: newEnv(t), engine: apply.NewEngine(apply.Options{}), progress: apply.NewProgress(maxAge)}
	cfg, counter := countingConfig(management.Config)
	e.counter = counter
	e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
	for i := range 4 {
		e.config = append(e.config, e.configMap(t, fmt.Sprintf("config-%d", i), map[string]string{"n": "1"}))
	}
	e.req = apply.Request{Owner: e.owner, Targets: e.targets, Progress: e.progress,
		Record: func(context.Context, apply.Inventory) error { e.records++; return nil },
		Phases: []desired.Phase{
			{Name: "config", Objects: e.config},
			{Name: "deploy", Objects: []*unstructured.Unstructured{e.configMap(t, "beside", nil), e.obj(t, deploymentYAML)}},
			{Name: "after", Objects: []*unstructured.Unstructured{e.configMap(t, "after", nil)}},
		}}
	return e
}

// pass makes one pass, as the controller's requeue does, and returns what it sent.
func (e *progressEnv) pass(ctx context.Context) (*apply.Result, map[string]int, error) {
	e.counter.reset()
	res, err := e.engine.Apply(ctx, e.req)
	e.req.Previous = res.Inventory
	return res, e.counter.reset(), err
}

// TestRetriesReadOnlyWhatIsNotAvailable: while a package waits on a Deployment, the passes that
// follow read the Deployment only, not the objects an earlier pass found available, and the
// object of the last phase, recorded by the first pass, is created without a read; an object
// whose desired state changed is read all the same, and so is every object under a changed
// request; the pass that completes reads what it skipped first, and once complete the memory is
// gone: the next pass reads every object (drift is found as before).
func TestRetriesReadOnlyWhatIsNotAvailable(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)

	res, counts, err := e.pass(t.Context())
	require.NoError(t, err)
	require.False(t, res.Complete())
	assert.Equal(t, "deploy", res.Progressing().Name)
	assert.Equal(t, 6, counts[http.MethodPatch], "the first pass creates the objects of the first two phases")
	assert.Equal(t, 5, e.progress.Available(), "the ConfigMaps are remembered available, the Deployment is not")
	assert.Equal(t, 1, e.records, "the objects of every phase are recorded once, before the first write")

	for range 3 {
		res, counts, err = e.pass(t.Context())
		require.NoError(t, err)
		require.False(t, res.Complete())
		assert.Equal(t, 1, counts[http.MethodGet], "a retry reads the Deployment only")
		assert.Zero(t, counts[http.MethodPatch], "and writes nothing")
		assert.Equal(t, 7, res.Inventory.Len(), "the objects not read stay in the inventory, and so does the one not sent yet")
	}

	// A new desired state of a remembered object is applied, not skipped.
	e.config[1].Object["data"] = map[string]any{"n": "2"}
	_, counts, err = e.pass(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, counts[http.MethodGet], "the changed ConfigMap and the Deployment")
	assert.Equal(t, 1, counts[http.MethodPatch], "the changed ConfigMap is applied")
	live, _ := get(t, e.mgmt, e.config[1])
	assert.Equal(t, map[string]any{"n": "2"}, live.Object["data"])

	// Another request (here: adoption allowed) judges objects anew.
	e.req.Adopt = v1alpha1.AdoptAlways
	_, counts, _ = e.pass(t.Context())
	assert.Equal(t, 6, counts[http.MethodGet], "every object is read under a changed request")
	e.req.Adopt = ""
	_, counts, _ = e.pass(t.Context())
	assert.Equal(t, 6, counts[http.MethodGet], "and again when it changes back")
	_, counts, _ = e.pass(t.Context())
	assert.Equal(t, 1, counts[http.MethodGet], "then the Deployment only")

	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	res, counts, err = e.pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	assert.Equal(t, 6, counts[http.MethodGet], "the Deployment, then the five objects skipped, once; the last phase's ConfigMap, recorded but never sent, is not read first")
	assert.Equal(t, 1, counts[http.MethodPatch], "the last phase's ConfigMap is created")
	assert.Equal(t, 1, e.records, "recorded once in all")
	assert.Zero(t, e.progress.Available(), "what was found available is forgotten once complete")

	res, counts, err = e.pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Complete())
	assert.Equal(t, 7, counts[http.MethodGet], "a converged owner's pass reads every object")
	assert.Zero(t, counts[http.MethodPatch])
}

// TestNeverCompleteOnMemoryAlone: an object found available, then deleted while the package
// waits, is recreated by the pass that would complete; one that is no longer available keeps
// its phase from completing, and the memory is forgotten, so the next pass reads everything.
func TestNeverCompleteOnMemoryAlone(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)
	early := e.obj(t, deploymentYAML)
	early.SetName("early")
	e.req.Phases[0].Objects = append(e.req.Phases[0].Objects, early)

	_, _, err := e.pass(t.Context())
	require.NoError(t, err)
	setDeploymentAvailable(t, e.mgmt, e.ns, "early")
	res, _, err := e.pass(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "deploy", res.Progressing().Name)
	assert.Equal(t, 6, e.progress.Available(), "the early Deployment is remembered available too")

	// Someone deletes a ConfigMap of the first phase and the early Deployment loses its pods.
	require.NoError(t, e.mgmt.Delete(t.Context(), e.config[0].DeepCopy()))
	setDeploymentStatus(t, e.mgmt, e.ns, "early", false)
	_, counts, _ := e.pass(t.Context())
	assert.Equal(t, 1, counts[http.MethodGet], "while the package waits, the memory holds")

	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	res, _, err = e.pass(t.Context())
	require.NoError(t, err)
	require.False(t, res.Complete(), "the early Deployment is not available any more")
	assert.Equal(t, "config", res.Progressing().Name)
	assert.Contains(t, res.Summary(), "early")
	_, ok := get(t, e.mgmt, e.config[0])
	assert.True(t, ok, "the deleted ConfigMap is recreated")
	assert.Zero(t, e.progress.Available(), "the memory is forgotten")

	_, counts, _ = e.pass(t.Context())
	assert.Equal(t, 5, counts[http.MethodGet], "the next pass reads every object of the phase it now waits in")

	setDeploymentAvailable(t, e.mgmt, e.ns, "early")
	res, _, err = e.pass(t.Context())
	require.NoError(t, err)
	assert.True(t, res.Complete(), res.Summary())
}

// TestFailedPassForgetsWhatWasAvailable: a pass that fails forgets every object found
// available, whether it is refused before anything is sent or fails on an object: the memory
// may be what keeps the owner from converging (the Namespace a Deployment needs deleted
// meanwhile, say), so the next pass reads, and restores, everything.
func TestFailedPassForgetsWhatWasAvailable(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)
	e.req.Confine = map[string]string{"": e.ns}
	_, _, err := e.pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, 5, e.progress.Available())

	outside := e.configMap(t, "outside", nil)
	outside.SetNamespace("elsewhere")
	e.req.Phases[1].Objects = append(e.req.Phases[1].Objects, outside)
	_, counts, err := e.pass(t.Context())
	var confined *apply.ConfinementError
	require.ErrorAs(t, err, &confined)
	assert.Empty(t, counts[http.MethodPatch], "refused before anything is sent")
	assert.Zero(t, e.progress.Available(), "a pass refused forgets")

	e.req.Phases[1].Objects = e.req.Phases[1].Objects[:len(e.req.Phases[1].Objects)-1]
	_, _, err = e.pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, 5, e.progress.Available())

	theirs := e.configMap(t, "theirs", map[string]string{"owner": "someone"})
	require.NoError(t, e.mgmt.Create(t.Context(), theirs.DeepCopy()))
	e.req.Phases[1].Objects = append(e.req.Phases[1].Objects, e.configMap(t, "theirs", nil))
	_, _, err = e.pass(t.Context())
	var collision *apply.CollisionError
	require.ErrorAs(t, err, &collision)
	assert.Zero(t, e.progress.Available(), "a pass that fails on an object forgets")
}

// TestObjectsFoundAvailableAreReadAgainAfterMaxAge: the memory of an object found available
// lasts Progress's age at most, so that drift of an object the package waits behind is found
// while it waits.
func TestObjectsFoundAvailableAreReadAgainAfterMaxAge(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 300*time.Millisecond)
	_, _, err := e.pass(t.Context())
	require.NoError(t, err)
	_, counts, _ := e.pass(t.Context())
	require.Equal(t, 1, counts[http.MethodGet], "the Deployment only, within the age")
	ctx := t.Context()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, counts, _ := e.pass(ctx)
		assert.Equal(c, 6, counts[http.MethodGet], "every object once its memory is older than the age")
	}, eventuallyTimeout, eventuallyInterval)
}

// TestObjectsWithMappedConditionsAreReadOnRetries: an object whose conditions a phase maps is
// read on every pass, so that the mapped conditions stay reported while the package waits.
func TestObjectsWithMappedConditionsAreReadOnRetries(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)
	e.req.Phases = []desired.Phase{
		{Name: "config", Objects: []*unstructured.Unstructured{e.configMap(t, "mapped", nil), e.configMap(t, "plain", nil)},
			ConditionMappings: []desired.ConditionMapping{{Object: 0, Source: "Ready", Destination: "example.com/Ready"}}},
		{Name: "deploy", Objects: []*unstructured.Unstructured{e.obj(t, deploymentYAML)}},
	}
	_, _, err := e.pass(t.Context())
	require.NoError(t, err)
	res, counts, err := e.pass(t.Context())
	require.NoError(t, err)
	require.False(t, res.Complete())
	assert.Equal(t, 2, counts[http.MethodGet], "the mapped ConfigMap and the Deployment")
}
