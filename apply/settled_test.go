package apply_test

import (
	"context"
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

// converged takes a progressEnv's package to complete with the update memory on (an interval),
// and returns it ready for an update.
func converged(t *testing.T, interval time.Duration) *progressEnv {
	t.Helper()
	e := newProgressEnv(t, 0)
	e.req.Interval = interval
	_, _, err := e.pass(t.Context())
	require.NoError(t, err)
	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	res, _, err := e.pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	require.Equal(t, 7, e.progress.Settled(), "the complete pass settled every object")
	return e
}

// TestUpdateWritesOnlyWhatChanged (issue 46): once the package converged, an update that
// changes one of its seven objects costs one write and no read: the six unchanged objects are
// neither read nor sent, and the changed ConfigMap is applied over the resourceVersion the
// complete pass left it at. A pass that changes nothing (the interval's) reads every object, as
// drift detection needs.
func TestUpdateWritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	e := converged(t, time.Hour)

	e.config[1].Object["data"] = map[string]any{"n": "2"}
	res, counts, err := e.pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	assert.Zero(t, counts[http.MethodGet], "no object is read")
	assert.Equal(t, 1, counts[http.MethodPatch], "the changed ConfigMap is written, nothing else")
	assert.Equal(t, map[string]int{http.MethodPatch: 1}, counts, "no other request")
	live, _ := get(t, e.mgmt, e.config[1])
	assert.Equal(t, map[string]any{"n": "2"}, live.Object["data"])
	assert.Equal(t, 7, res.Inventory.Len(), "the inventory keeps every object")

	_, counts, err = e.pass(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 7, counts[http.MethodGet], "the interval's pass reads every object")
	assert.Zero(t, counts[http.MethodPatch])

	// The Deployment has a status its controller writes: its update is read first.
	e.req.Phases[1].Objects[1].Object["metadata"].(map[string]any)["labels"] = map[string]any{"v": "2"}
	_, counts, err = e.pass(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, counts[http.MethodGet], "the Deployment only")
	assert.Equal(t, 1, counts[http.MethodPatch])
}

// TestUpdateOfAChangedObjectReadsIt: an object changed since the complete pass (an edit, or
// deleted and created again by another owner) fails the precondition of the update, writing
// nothing, and is read and judged as in any pass: the edit is corrected, the other owner's
// object is a collision.
func TestUpdateOfAChangedObjectReadsIt(t *testing.T) {
	t.Parallel()
	e := converged(t, time.Hour)

	live, _ := get(t, e.mgmt, e.config[1])
	live.Object["data"] = map[string]any{"n": "edited", "extra": "x"}
	require.NoError(t, e.mgmt.Update(t.Context(), live))
	e.config[1].Object["data"] = map[string]any{"n": "2"}
	_, counts, err := e.pass(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, counts[http.MethodGet], "the edited ConfigMap is read once its precondition failed")
	assert.Equal(t, 3, counts[http.MethodPatch], "the refused update, the apply that conflicts with the editor's field, the forced one (drift correction)")
	live, _ = get(t, e.mgmt, e.config[1])
	assert.Equal(t, "2", live.Object["data"].(map[string]any)["n"])

	// Another owner's ConfigMap under the same name.
	theirs := e.configMap(t, e.config[2].GetName(), map[string]string{"owner": "someone"})
	require.NoError(t, e.mgmt.Delete(t.Context(), e.config[2].DeepCopy()))
	require.NoError(t, e.mgmt.Create(t.Context(), theirs))
	e.config[2].Object["data"] = map[string]any{"n": "3"}
	_, _, err = e.pass(t.Context())
	var collision *apply.CollisionError
	require.ErrorAs(t, err, &collision, "the other owner's object is not written")
	live, _ = get(t, e.mgmt, e.config[2])
	assert.Equal(t, "someone", live.Object["data"].(map[string]any)["owner"])
	assert.Zero(t, e.progress.Settled(), "a failed pass forgets what was settled")
}

// TestUpdateTrustsTheSettledMemoryForOneInterval: without an interval, an update reads every
// object again. Once the complete pass is older than one interval (here a nanosecond), the
// update reads every unchanged object (drift detection), and writes the changed one over the
// resourceVersion it settled without reading it: the precondition, not the memory's age,
// proves it unchanged (issue 46: an update wave longer than the interval read every object).
func TestUpdateTrustsTheSettledMemoryForOneInterval(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		interval time.Duration
		reads    int
	}{"no interval": {0, 7}, "older than the interval": {time.Nanosecond, 6}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := converged(t, tc.interval)
			e.config[1].Object["data"] = map[string]any{"n": "2"}
			_, counts, err := e.pass(t.Context())
			require.NoError(t, err)
			assert.Equal(t, tc.reads, counts[http.MethodGet], "objects read")
			assert.Equal(t, 1, counts[http.MethodPatch], "the changed one is written")
			live, _ := get(t, e.mgmt, e.config[1])
			assert.Equal(t, map[string]any{"n": "2"}, live.Object["data"])
		})
	}
}

// TestReportedDriftSettlesNothing: a complete pass that reports drift and leaves it
// (DriftPolicy Report) settles nothing, so every following pass reads every object: the drift
// stays reported, and the other objects' drift is found too.
func TestReportedDriftSettlesNothing(t *testing.T) {
	t.Parallel()
	e := converged(t, time.Hour)
	e.req.DriftPolicy = v1alpha1.DriftReport
	_, _, err := e.pass(t.Context()) // another request: judged anew, settled again
	require.NoError(t, err)
	require.Equal(t, 7, e.progress.Settled())

	live, _ := get(t, e.mgmt, e.config[0])
	live.Object["data"] = map[string]any{"n": "edited"}
	require.NoError(t, e.mgmt.Update(t.Context(), live))
	res, counts, err := e.pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	assert.Len(t, res.Drift, 1, "the edit is reported")
	assert.Zero(t, e.progress.Settled(), "a pass that leaves drift settles nothing")
	assert.Equal(t, 7, counts[http.MethodGet])

	e.config[1].Object["data"] = map[string]any{"n": "2"}
	res, counts, err = e.pass(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 7, counts[http.MethodGet], "the update reads every object")
	assert.Len(t, res.Drift, 1, "and still reports the drift")
}

// TestUpdateOfANamespaceReadsNothing: a Namespace has a status, but the API server's own, set
// when it is created: it is settled with its resourceVersion, and its update needs no read.
func TestUpdateOfANamespaceReadsNothing(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)
	ns := e.obj(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: NAME\n")
	ns.SetName(e.ns + "-settled")
	t.Cleanup(func() { _ = e.mgmt.Delete(context.Background(), ns.DeepCopy()) })
	e.req.Phases = append([]desired.Phase{{Name: "namespace", Objects: []*unstructured.Unstructured{ns}}}, e.req.Phases...)
	e.req.Interval = time.Hour
	_, _, err := e.pass(t.Context())
	require.NoError(t, err)
	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	res, _, err := e.pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())

	ns.SetLabels(map[string]string{"team": "a"})
	res, counts, err := e.pass(t.Context())
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	assert.Zero(t, counts[http.MethodGet], "no object is read, the Namespace neither")
	assert.Equal(t, 1, counts[http.MethodPatch], "the Namespace is written")
}
