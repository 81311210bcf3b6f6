package e2e

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// blackHole is a hosted API server address that accepts connections and never answers, until
// it is told to forward them to the real hosted API server.
type blackHole struct {
	listener net.Listener
	target   string
	accepted atomic.Int64
	forward  atomic.Bool
	mu       sync.Mutex
	held     []net.Conn
}

func newBlackHole(t *testing.T, target string) *blackHole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &blackHole{listener: l, target: target}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			if !b.forward.Load() {
				b.mu.Lock()
				b.held = append(b.held, c) // never answered
				b.mu.Unlock()
				continue
			}
			up, err := net.Dial("tcp", b.target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.held {
			c.Close()
		}
	})
	return b
}

// refusedAddress returns a loopback address where nothing listens.
func refusedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestDeadHostedClustersCostTheFleetNothing: beside healthy hosted clusters, one whose API
// server accepts connections and never answers and one that refuses them. Their circuits open:
// reconciles stop sending to them, a prober checks them once per backoff step, one Warning event
// is recorded per transition, and the black hole's Packages become Ready as soon as it answers.
func TestDeadHostedClustersCostTheFleetNothing(t *testing.T) {
	real := hostOf(t, suite.hosted.Config)
	hole := newBlackHole(t, real)
	dead := []struct {
		name, server string
	}{
		{"hole", "https://" + hole.listener.Addr().String()},
		{"refused", "https://" + refusedAddress(t)},
	}
	var deadODs []*v1alpha1.ObjectDeployment
	for _, d := range dead {
		_, hcp := newHostedControlPlane(t, "", true)
		kubeconfig, err := suite.hosted.Kubeconfig("dead-"+hcp, "system:masters")
		require.NoError(t, err)
		putConnectorSecret(t, hcp, rewriteServer(t, kubeconfig, d.server))
		od := inlineDeployment(t, hcp, d.name, "dead-"+d.name)
		require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
		deadODs = append(deadODs, od)
	}
	var healthy []*v1alpha1.ObjectDeployment
	for i := range 3 {
		hcp := newHCPNamespace(t, "")
		od := inlineDeployment(t, hcp, "healthy", "healthy-"+string(rune('a'+i)))
		require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
		healthy = append(healthy, od)
	}
	for _, od := range healthy {
		waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	}
	for _, od := range deadODs {
		// After the first failure the circuit is open: reconciles fail fast and say when the
		// prober tries again.
		waitForReadyMessage(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason, "next probe at")
	}

	// While the circuits are open, the black hole sees the prober only: let several backoff
	// steps pass, counted by the prober itself.
	probes0, accepted0 := suite.hostedClients.Probes(), hole.accepted.Load()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.GreaterOrEqual(ct, suite.hostedClients.Probes()-probes0, int64(4), "probes of the two dead clusters")
	}, timeout, interval)
	probes := suite.hostedClients.Probes() - probes0
	assert.LessOrEqual(t, hole.accepted.Load()-accepted0, probes+1, "no reconcile connects to a cluster whose circuit is open")

	// One Warning event per transition, however many retries.
	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(deadODs[0].Namespace)))
	warnings := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Name == deadODs[0].Name && e.Reason == v1alpha1.HostedClusterUnavailableReason {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings, "one event for the transition to HostedClusterUnavailable")

	// The black hole starts answering: its Package recovers through the probe.
	hole.forward.Store(true)
	waitForReady(t, deadODs[0], metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "dead-hole", "settings"))
}
