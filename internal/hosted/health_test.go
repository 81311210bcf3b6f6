package hosted

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/apply"
)

// TestCircuit: an unavailable hosted API server fails fast without a request until a probe
// gets an answer; the probe closes the circuit and wakes the namespace.
func TestCircuit(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	var requests atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	cs := &capturingServer{Server: srv}
	kc := hostileKubeconfig(t, srv.URL, pemCert(cs), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kc)).Build()
	c := NewClients(reader, Options{ProbeInterval: 20 * time.Millisecond, MaxProbeInterval: 80 * time.Millisecond, ProbeTimeout: time.Second})
	woken := make(chan string, 1)
	c.OnRecovered(func(ns string) { woken <- ns })

	_, err := c.Target(t.Context(), "clusters-a")
	require.NoError(t, err)
	c.MarkUnavailable("clusters-a", errors.New("dial tcp: i/o timeout"))
	assert.Equal(t, 1, c.States()[HealthOpen])

	before := requests.Load()
	_, err = c.Target(t.Context(), "clusters-a")
	var down *UnavailableError
	require.ErrorAs(t, err, &down, "an open circuit fails fast")
	var unavailable *apply.TargetUnavailableError
	require.ErrorAs(t, err, &unavailable)
	assert.ErrorContains(t, err, "i/o timeout")
	assert.Equal(t, before, requests.Load(), "nothing is sent while the circuit is open")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Failed probes (503) keep it open, one per backoff step.
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.GreaterOrEqual(ct, c.Probes(), int64(3)) }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 0, c.States()[HealthClosed])
	select {
	case ns := <-woken:
		t.Fatalf("woken %s while the server answers 503", ns)
	default:
	}

	up.Store(true)
	select {
	case ns := <-woken:
		assert.Equal(t, "clusters-a", ns)
	case <-time.After(5 * time.Second):
		t.Fatal("a successful probe must wake the namespace")
	}
	_, err = c.Target(t.Context(), "clusters-a")
	require.NoError(t, err, "the circuit is closed")

	// Reset closes an open circuit at once (the HostedCluster turned Available).
	c.MarkUnavailable("clusters-a", errors.New("refused"))
	c.Reset("clusters-a")
	_, err = c.Target(t.Context(), "clusters-a")
	require.NoError(t, err)
}

func TestBackoffIsCapped(t *testing.T) {
	t.Parallel()
	c := NewClients(fake.NewClientBuilder().Build(), Options{ProbeInterval: time.Second, MaxProbeInterval: 8 * time.Second})
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 10: 8 * time.Second} {
		got := c.backoff(n)
		assert.GreaterOrEqual(t, got, want, "step %d", n)
		assert.LessOrEqual(t, got, want+want/5, "step %d: at most 20 %% jitter", n)
	}
}
