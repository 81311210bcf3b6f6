package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// leaderState is what a controller process's metrics say about leadership and work.
type leaderState struct {
	leading    bool
	reconciles float64
}

func leaderStateOf(ctx context.Context, ct *assert.CollectT, p *controllerProc, lease string) (leaderState, bool) {
	m, err := p.scrape(ctx)
	if !assert.NoError(ct, err) {
		return leaderState{}, false
	}
	leading, _ := sum(m, "leader_election_master_status", map[string]string{"name": lease})
	reconciles, _ := sum(m, "controller_runtime_reconcile_total", map[string]string{"controller": "package"})
	return leaderState{leading: leading == 1, reconciles: reconciles}, true
}

// TestLeaderElection runs two controller processes with one lease: only the leader reconciles.
// SIGKILL the leader (no release of the lease) and the other takes over once the lease expires.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	lease := "e2e-leader-" + ns
	args := []string{"--leader-elect", "--leader-election-id", lease, "--namespace", ns}
	procs := []*controllerProc{runController(t, "leader", args...), runController(t, "leader", args...)}
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "led")), "e2e/"+ns+"/led:v1")
	first := newPackage(ns, "first", suite.registry.Host+"/e2e/"+ns+"/led:v1", "")
	first.Labels = map[string]string{shardLabel: "leader"}
	createPackage(t, first)
	waitForReady(t, first, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	var leader, follower *controllerProc
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var states []leaderState
		for _, p := range procs {
			s, ok := leaderStateOf(t.Context(), ct, p, lease)
			if !ok {
				return
			}
			states = append(states, s)
		}
		if !assert.NotEqual(ct, states[0].leading, states[1].leading, "exactly one process leads: %+v", states) {
			return
		}
		leader, follower = procs[0], procs[1]
		if states[1].leading {
			leader, follower = procs[1], procs[0]
			states[0], states[1] = states[1], states[0]
		}
		assert.Positive(ct, states[0].reconciles, "the leader reconciles")
		assert.Zero(ct, states[1].reconciles, "the follower does not reconcile")
	}, timeout, interval)

	leader.kill()
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "led-after")), "e2e/"+ns+"/led-after:v1")
	second := newPackage(ns, "second", suite.registry.Host+"/e2e/"+ns+"/led-after:v1", "")
	second.Labels = first.Labels
	createPackage(t, second)
	// The lease expires (15s after its last renewal) and the follower takes over.
	waitForReady(t, second, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		if s, ok := leaderStateOf(t.Context(), ct, follower, lease); ok {
			assert.True(ct, s.leading, "the follower leads now")
			assert.Positive(ct, s.reconciles)
		}
	}, timeout, interval)
}
