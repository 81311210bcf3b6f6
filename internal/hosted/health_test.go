package hosted

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	c := NewClients(reader, Options{Kubeconfig: anyServer, ProbeInterval: 20 * time.Millisecond, MaxProbeInterval: 80 * time.Millisecond, ProbeTimeout: time.Second})
	woken := make(chan string, 1)
	c.OnRecovered(func(ns string) { woken <- ns })

	_, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	opened := c.MarkUnavailable("clusters-a", errors.New("dial tcp: i/o timeout"))
	require.Error(t, opened, "the error of the failure that opened the circuit")
	assert.Equal(t, 1, c.States()[HealthOpen])

	before := requests.Load()
	_, err = c.Target(t.Context(), "clusters-a", nil)
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
	_, err = c.Target(t.Context(), "clusters-a", nil)
	assert.EqualError(t, err, opened.Error(), "the message stays that of the opening failure, whatever the probes: a retry writes no status")
	assert.NotContains(t, err.Error(), "503", "no probe error in the message")
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
	_, err = c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err, "the circuit is closed")

	// Reset closes an open circuit at once (the HostedCluster turned Available).
	require.Error(t, c.MarkUnavailable("clusters-a", errors.New("refused")))
	c.Reset("clusters-a")
	_, err = c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
}

func TestBackoffIsCapped(t *testing.T) {
	t.Parallel()
	c := NewClients(fake.NewClientBuilder().Build(), Options{Kubeconfig: anyServer, ProbeInterval: time.Second, MaxProbeInterval: 8 * time.Second})
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 10: 8 * time.Second} {
		got := c.backoff(n)
		assert.GreaterOrEqual(t, got, want, "step %d", n)
		assert.LessOrEqual(t, got, want+want/5, "step %d: at most 20 %% jitter", n)
	}
}

// newProbedServer returns a TLS server that answers every request with 503 (so probes fail and
// circuits stay open) and a connector Secret's kubeconfig for it.
func newProbedServer(t *testing.T) []byte {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return hostileKubeconfig(t, srv.URL, pemCert(&capturingServer{Server: srv}), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
}

// startProber runs the prober of c until the test ends.
func startProber(t *testing.T, c *Clients) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestProbesAreNotRequests: the time of probes is not counted as time reconciles spend waiting
// on hosted API servers (OnRequest); only requests of the hosted client are.
func TestProbesAreNotRequests(t *testing.T) {
	t.Parallel()
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", newProbedServer(t))).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, ProbeInterval: 20 * time.Millisecond, MaxProbeInterval: 40 * time.Millisecond, ProbeTimeout: time.Second})
	var requests, probes atomic.Int64
	c.Observe(func(time.Duration) { requests.Add(1) }, func(string, time.Duration, error) { probes.Add(1) })

	target, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	require.Error(t, target.Client.Get(t.Context(), client.ObjectKey{Namespace: "x", Name: "y"}, &corev1.ConfigMap{}), "the server answers 503")
	sent := requests.Load()
	require.Positive(t, sent, "requests of the hosted client are observed")

	require.Error(t, c.MarkUnavailable("clusters-a", errors.New("refused")))
	startProber(t, c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.GreaterOrEqual(ct, probes.Load(), int64(3)) }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, sent, requests.Load(), "probes are observed as probes only")
}

// blackHole returns the address of a listener that accepts connections and never answers.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn) // never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range held {
			conn.Close()
		}
	})
	return l.Addr().String()
}

// TestHandshakeBoundedByDialTimeout: a hosted API server that accepts the connection and never
// answers costs a request the dial timeout (the TLS handshake), not client-go's 10 s handshake
// timeout nor the request timeout.
func TestHandshakeBoundedByDialTimeout(t *testing.T) {
	t.Parallel()
	in := &rest.Config{Host: "https://" + blackHole(t), Timeout: 8 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{CAData: pemCert(newCapturingServer(t))}}
	tlsConfig, err := rest.TLSConfigFor(in)
	require.NoError(t, err)
	cfg := withShortHandshake(in, 100*time.Millisecond, time.Minute, tlsConfig)
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, cfg.Host+"/readyz", nil)
	require.NoError(t, err)
	_, err = hc.Do(req) //nolint:bodyclose // no answer, no body
	assert.ErrorContains(t, err, "TLS handshake timeout", "the handshake gave up, not the request")
}

// TestFirstContact: a client is not handed out before its API server has answered once, and the
// caller waits FirstContactWait at most for that answer, which is sought off the caller.
//   - a server that accepts connections and never answers: the caller gets an
//     *UnavailableError after the wait, not after the handshake or request timeouts, and once
//     the first contact has failed, the circuit's error without waiting;
//   - a server whose first answer comes after the wait: the namespace is woken when it comes,
//     and the client is handed out from then on.
func TestFirstContact(t *testing.T) {
	t.Parallel()
	var delay atomic.Int64
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(time.Duration(delay.Load())):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(slow.Close)
	token := func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" }
	ca := pemCert(newCapturingServer(t))
	reader := fake.NewClientBuilder().WithObjects(
		connectorSecret("hole", hostileKubeconfig(t, "https://"+blackHole(t), ca, token)),
		connectorSecret("slow", hostileKubeconfig(t, slow.URL, pemCert(&capturingServer{Server: slow}), token)),
	).Build()
	const wait = 200 * time.Millisecond
	c := NewClients(reader, Options{Kubeconfig: anyServer, Timeout: time.Minute, DialTimeout: time.Minute, ProbeTimeout: 2 * time.Second,
		ProbeInterval: time.Minute, FirstContactWait: wait})
	woken := make(chan string, 4)
	c.OnRecovered(func(ns string) { woken <- ns })

	start := time.Now()
	_, err := c.Target(t.Context(), "hole", nil)
	var down *UnavailableError
	require.ErrorAs(t, err, &down)
	assert.ErrorContains(t, err, "no answer to the first contact within 200ms")
	assert.Less(t, time.Since(start), time.Minute, "the caller did not wait for the handshake")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, 1, c.States()[HealthOpen], "the first contact ends at the probe timeout and opens the circuit")
	}, 10*time.Second, 10*time.Millisecond)
	_, err = c.Target(t.Context(), "hole", nil)
	require.ErrorAs(t, err, &down)
	assert.ErrorContains(t, err, "probe:", "the failure of the first contact")
	assert.Equal(t, int64(1), c.Probes(), "one first contact, no probe from the caller")

	delay.Store(int64(time.Second))
	_, err = c.Target(t.Context(), "slow", nil)
	require.ErrorAs(t, err, &down, "no answer within the wait")
	select {
	case ns := <-woken:
		assert.Equal(t, "slow", ns)
	case <-time.After(10 * time.Second):
		t.Fatal("the first answer must wake the namespace")
	}
	_, err = c.Target(t.Context(), "slow", nil)
	require.NoError(t, err)
}

// TestDeletedSecretIsNotProbed: when the connector Secret of a namespace whose circuit is open
// is deleted, its client and circuit are forgotten and nothing more is probed for it, while the
// other open circuits are still probed.
func TestDeletedSecretIsNotProbed(t *testing.T) {
	t.Parallel()
	kc := newProbedServer(t)
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kc), connectorSecret("clusters-b", kc)).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, ProbeInterval: 20 * time.Millisecond, MaxProbeInterval: 40 * time.Millisecond, ProbeTimeout: time.Second})
	var mu sync.Mutex
	probes := map[string]int{}
	c.Observe(nil, func(ns string, _ time.Duration, _ error) { mu.Lock(); probes[ns]++; mu.Unlock() })
	count := func(ns string) int { mu.Lock(); defer mu.Unlock(); return probes[ns] }
	for _, ns := range []string{"clusters-a", "clusters-b"} {
		_, err := c.Target(t.Context(), ns, nil)
		require.NoError(t, err)
		require.Error(t, c.MarkUnavailable(ns, errors.New("refused")))
	}
	startProber(t, c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.GreaterOrEqual(ct, count("clusters-a"), 2) }, 5*time.Second, 5*time.Millisecond)

	require.NoError(t, reader.Delete(t.Context(), connectorSecret("clusters-a", nil)))
	a, b := count("clusters-a"), count("clusters-b")
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.GreaterOrEqual(ct, count("clusters-b")-b, 4) }, 5*time.Second, 5*time.Millisecond)
	assert.LessOrEqual(t, count("clusters-a")-a, 1, "at most the probe in flight when the Secret went")
	assert.Equal(t, 1, c.States()[HealthOpen]+c.States()[HealthProbing], "only clusters-b keeps a circuit")
}

// TestIdleOpenCircuitIsEvicted: an open circuit whose namespace nothing uses any more is evicted
// after IdleTTL by the prober itself, without any further use of the cache, and not probed.
func TestIdleOpenCircuitIsEvicted(t *testing.T) {
	t.Parallel()
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", newProbedServer(t))).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, IdleTTL: time.Hour})
	now := time.Now()
	c.now = func() time.Time { return now }
	_, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	require.Error(t, c.MarkUnavailable("clusters-a", errors.New("refused")))

	now = now.Add(2 * time.Hour)
	assert.Empty(t, c.dueProbes(), "nothing to probe")
	cached, _ := c.Stats()
	assert.Zero(t, cached)
}

// TestNextProbeWhileProbing: while a probe is in flight, the next probe time the resources are
// requeued for is when that probe ends, not the past moment it was due, so that they are not
// retried again and again while it waits.
func TestNextProbeWhileProbing(t *testing.T) {
	t.Parallel()
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", newProbedServer(t))).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, ProbeTimeout: time.Minute})
	now := time.Now()
	c.now = func() time.Time { return now }
	_, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	require.Error(t, c.MarkUnavailable("clusters-a", errors.New("refused")))

	now = now.Add(time.Minute) // past the first backoff step, within the idle TTL
	require.Len(t, c.dueProbes(), 1, "the probe is due and marked in flight")
	_, err = c.Target(t.Context(), "clusters-a", nil)
	var down *UnavailableError
	require.ErrorAs(t, err, &down)
	assert.Equal(t, now.Add(time.Minute), down.NextProbe, "when the probe in flight ends at the latest")
}

// TestProbesOfAnOpenCircuitSpeakHTTP1: the first contact goes over the reconciles' HTTP/2
// transport; the probes of an open circuit have a client of their own, built when the first
// is due, that speaks HTTP/1.1 and keeps no connection.
func TestProbesOfAnOpenCircuitSpeakHTTP1(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	protos := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.URL.Path+" "+r.Proto]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	kc := hostileKubeconfig(t, srv.URL, pemCert(&capturingServer{Server: srv}), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kc)).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, ProbeInterval: 20 * time.Millisecond, MaxProbeInterval: 40 * time.Millisecond, ProbeTimeout: time.Second})
	_, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, map[string]int{"/readyz HTTP/2.0": 1}, protos, "the first contact, over the reconciles' transport")
	mu.Unlock()

	require.Error(t, c.MarkUnavailable("clusters-a", errors.New("dial tcp: i/o timeout")))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, err := c.Target(t.Context(), "clusters-a", nil)
		assert.NoError(ct, err, "a probe closed the circuit")
	}, 5*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Positive(t, protos["/readyz HTTP/1.1"], "the open circuit's probe: %v", protos)
	assert.Equal(t, 1, protos["/readyz HTTP/2.0"], "%v", protos)
}
