package apply_test

import (
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
