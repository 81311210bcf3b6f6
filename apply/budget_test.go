package apply_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// slowTransport answers every request after a delay, like an overloaded hosted API server.
type slowTransport struct {
	next  http.RoundTripper
	delay time.Duration
}

func (s slowTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-time.After(s.delay):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return s.next.RoundTrip(r)
}

// TestTargetBudgetBoundsASlowCluster: a cluster that answers every request slowly holds a pass
// for at most its target's budget, and is reported unavailable, so the caller's worker moves on.
func TestTargetBudgetBoundsASlowCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := rest.CopyConfig(hosted.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return slowTransport{next: rt, delay: 200 * time.Millisecond}
	})
	slow := newClient(t, cfg)
	var objs []*unstructured.Unstructured
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		objs = append(objs, e.configMap(t, name, nil))
	}
	targets := map[string]apply.Target{
		"":                          e.targets[""],
		v1alpha1.ClassHostedCluster: {Client: slow, Name: "slow hosted cluster", Budget: 500 * time.Millisecond},
	}
	res, err := apply.NewEngine(apply.Options{}).Apply(t.Context(), apply.Request{Owner: e.owner, Targets: targets,
		Phases: []desired.Phase{{Name: "slow", Class: v1alpha1.ClassHostedCluster, Objects: objs}}})
	var unavailable *apply.TargetUnavailableError
	require.ErrorAs(t, err, &unavailable, "the budget ran out")
	assert.Equal(t, v1alpha1.ClassHostedCluster, unavailable.Class)
	assert.Less(t, res.Created, len(objs), "the pass stopped at the budget, not after every object")
}

// lostAnswerTransport forwards writes to the API server and then loses the answer, like a
// connection cut after the request went out: the object exists, the caller saw an error.
type lostAnswerTransport struct{ next http.RoundTripper }

func (l lostAnswerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil || r.Method != http.MethodPatch {
		return resp, err
	}
	resp.Body.Close()
	return nil, errors.New("connection reset by peer")
}

// TestWriteWithLostAnswerStaysInInventory: a write whose answer is lost may have reached the
// API server. The object stays in the inventory, so that teardown still finds it.
func TestWriteWithLostAnswerStaysInInventory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := rest.CopyConfig(hosted.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return lostAnswerTransport{next: rt} })
	targets := map[string]apply.Target{
		"":                          e.targets[""],
		v1alpha1.ClassHostedCluster: {Client: newClient(t, cfg), Name: "flaky hosted cluster"},
	}
	cm := e.configMap(t, "lost", nil)
	engine := apply.NewEngine(apply.Options{})
	res, err := engine.Apply(t.Context(), apply.Request{Owner: e.owner, Targets: targets, DefaultNamespace: e.ns,
		Phases: []desired.Phase{{Name: "hosted", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{cm}}}})
	require.ErrorContains(t, err, "connection reset")
	_, exists := get(t, e.hosted, cm)
	require.True(t, exists, "the write reached the API server")
	assert.True(t, contains(res.Inventory, apply.RefOf(cm)), "an object that may exist is tracked")

	td, err := engine.Teardown(t.Context(), apply.TeardownRequest{Owner: e.owner, Inventory: res.Inventory, Targets: e.targets})
	require.NoError(t, err)
	assert.True(t, td.Done())
	_, exists = get(t, e.hosted, cm)
	assert.False(t, exists, "teardown removed it")
}

// TestRecordOutsideTheTargetBudget: Record writes the caller's status on the management
// cluster; it runs under the caller's context, not under (and not using up) a hosted target's
// budget.
func TestRecordOutsideTheTargetBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	targets := map[string]apply.Target{
		"":                          e.targets[""],
		v1alpha1.ClassHostedCluster: {Client: e.targets[v1alpha1.ClassHostedCluster].Client, Name: "hosted cluster", Budget: time.Minute},
	}
	records := 0
	record := func(ctx context.Context, _ apply.Inventory) error {
		records++
		_, budgeted := ctx.Deadline()
		assert.False(t, budgeted, "Record runs under the caller's context, which has no deadline")
		return nil
	}
	_, err := apply.NewEngine(apply.Options{}).Apply(t.Context(), apply.Request{Owner: e.owner, Targets: targets, DefaultNamespace: e.ns, Record: record,
		Phases: []desired.Phase{{Name: "hosted", Class: v1alpha1.ClassHostedCluster, Objects: []*unstructured.Unstructured{e.configMap(t, "budgeted", nil)}}}})
	require.NoError(t, err)
	assert.Equal(t, 1, records)
}
