package e2e

import (
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// blackHole is a hosted API server address that accepts connections and never answers, until
// it is told to forward them to the real hosted API server.
type blackHole struct {
	listener net.Listener
	target   string
	accepted atomic.Int64
	// open counts the forwarded connections still open.
	open    atomic.Int64
	forward atomic.Bool
	mu      sync.Mutex
	held    []net.Conn
	// forwarded are both ends of the connections passed on to the real server.
	forwarded []net.Conn
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
			b.mu.Lock()
			b.forwarded = append(b.forwarded, c, up)
			b.mu.Unlock()
			b.open.Add(1)
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close(); b.open.Add(-1) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range append(b.held, b.forwarded...) {
			c.Close()
		}
	})
	return b
}

// server is the URL of the black hole for a kubeconfig.
func (b *blackHole) server() string { return "https://" + b.listener.Addr().String() }

// cut makes the black hole stop answering: the connections it forwards are closed, and new
// ones are held unanswered.
func (b *blackHole) cut() {
	b.forward.Store(false)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.forwarded {
		c.Close()
	}
	b.forwarded = nil
}

// newSlowServer returns a hosted API server that answers every request after delay: a reverse
// proxy, with a serving certificate of its own, in front of the real hosted API server. It
// returns the server URL and the CA (PEM) that verifies it.
func newSlowServer(t *testing.T, delay time.Duration) (server string, ca []byte) {
	t.Helper()
	upstream, err := url.Parse(suite.hosted.Config.Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(suite.hosted.Config)
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(upstream) }, Transport: transport}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := time.NewTimer(delay)
		defer wait.Stop()
		select {
		case <-wait.C:
			proxy.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// rewriteServerAndCA points a kubeconfig at another server, verified by another CA.
func rewriteServerAndCA(t *testing.T, kubeconfig []byte, server string, ca []byte) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(rewriteServer(t, kubeconfig, server))
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.CertificateAuthorityData = ca
	}
	out, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return out
}

// reconcileDurations reads the shared controller's gotk_reconcile_duration_seconds of obj: how
// many reconciles it had, and how many of them took longer than the largest bucket that is not
// above the hosted request timeout, that is, waited on a hosted API server for about that long.
func reconcileDurations(t testingT, kind string, obj client.Object) (total, slow uint64) {
	t.Helper()
	families, err := suite.reconcileMetrics.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "gotk_reconcile_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, map[string]string{"kind": kind, "namespace": obj.GetNamespace(), "name": obj.GetName()}) {
				continue
			}
			h := m.GetHistogram()
			var fast uint64
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() <= hostedRequestTimeout.Seconds() {
					fast = b.GetCumulativeCount()
				}
			}
			return h.GetSampleCount(), h.GetSampleCount() - fast
		}
	}
	return 0, 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
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

// deadDeployment creates an ObjectDeployment in a new hosted-control-plane namespace whose
// connector Secret names server (verified by ca, when given).
func deadDeployment(t *testing.T, name, server string, ca []byte) *v1alpha1.ObjectDeployment {
	t.Helper()
	_, hcp := newHostedControlPlane(t, "", true)
	kubeconfig, err := suite.hosted.ConnectorKubeconfig(name + "-" + hcp)
	require.NoError(t, err)
	if ca != nil {
		putConnectorSecret(t, hcp, rewriteServerAndCA(t, kubeconfig, server, ca))
	} else {
		putConnectorSecret(t, hcp, rewriteServer(t, kubeconfig, server))
	}
	hostedNS := fmt.Sprintf("%s-%d", name, nsCounter.Add(1))
	deleteHostedNamespaceAtEnd(t, hostedNS)
	od := inlineDeployment(t, hcp, name, hostedNS)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
	return od
}

// TestDeadHostedClustersCostTheFleetNothing: beside healthy hosted clusters, one whose API
// server accepts connections and never answers (the hole), one that refuses them, one that
// answers every request after a delay, and a second black hole whose only resource is deleted.
// Counted, not timed:
//   - no reconcile took longer than the hosted request timeout, the hole's included (its first
//     contact is the prober's), but the slow cluster's, for its own resource only, which still
//     becomes Ready;
//   - while a circuit is open only the prober connects, once per backoff step, and the retries of
//     the dead resource write no status;
//   - one Warning event per transition;
//   - a black hole whose last resource is gone is probed no more;
//   - the hole's resource becomes Ready once the hole forwards to the real API server.
func TestDeadHostedClustersCostTheFleetNothing(t *testing.T) {
	// Not parallel: it counts the shared controller's probes of every namespace, and times its
	// reconciles against the hosted request timeout.
	real := hostOf(t, suite.hosted.Config)
	hole, gone := newBlackHole(t, real), newBlackHole(t, real)
	// Slower than the reconcile-duration bucket below the hosted request timeout (2.16 s of
	// Flux's buckets) takes two requests, faster than the timeout itself: the slow cluster's
	// first reconcile (discovery, a read, an apply) lands above that bucket however few
	// requests it makes.
	slowServer, slowCA := newSlowServer(t, 1200*time.Millisecond)
	holeOD := deadDeployment(t, "hole", hole.server(), nil)
	holePkg := hostedPackage(t, holeOD.Namespace, "hole-pkg")
	refusedOD := deadDeployment(t, "refused", "https://"+refusedAddress(t), nil)
	goneOD := deadDeployment(t, "gone", gone.server(), nil)
	slowOD := deadDeployment(t, "slow", slowServer, slowCA)
	var healthy []*v1alpha1.ObjectDeployment
	for i := range 3 {
		hcp := newHCPNamespace(t, "")
		hostedNS := fmt.Sprintf("healthy-%d", nsCounter.Add(1))
		deleteHostedNamespaceAtEnd(t, hostedNS)
		od := inlineDeployment(t, hcp, fmt.Sprintf("healthy-%d", i), hostedNS)
		require.NoError(t, suite.mgmtClient.Create(t.Context(), od))
		healthy = append(healthy, od)
	}
	for _, od := range append(healthy, slowOD) {
		waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	}
	for _, obj := range []client.Object{holeOD, holePkg, refusedOD, goneOD} {
		// Once the first contact (a probe) has failed, the circuit's message: it stays the same
		// until the circuit closes.
		waitForReadyMessage(t, obj, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason, "probe:")
	}

	// While the circuits are open, the hole sees the prober only, and the hole's resources are
	// retried at each probe step without writing their status.
	probes0, accepted0 := suite.hostedClients.Probes(), hole.accepted.Load()
	patches0 := suite.requests.get(holeOD.Namespace)["PATCH"]
	odReconciles0, _ := reconcileDurations(t, v1alpha1.ObjectDeploymentKind, holeOD)
	pkgReconciles0, _ := reconcileDurations(t, v1alpha1.PackageKind, holePkg)
	eventually(t, func(a *attempt) {
		assert.GreaterOrEqual(a, hole.accepted.Load()-accepted0, int64(3), "probe steps of the hole")
		odReconciles, _ := reconcileDurations(a, v1alpha1.ObjectDeploymentKind, holeOD)
		assert.GreaterOrEqual(a, odReconciles-odReconciles0, uint64(3), "retries of the hole's ObjectDeployment")
		pkgReconciles, _ := reconcileDurations(a, v1alpha1.PackageKind, holePkg)
		assert.GreaterOrEqual(a, pkgReconciles-pkgReconciles0, uint64(3), "retries of the hole's Package")
	})
	probes := suite.hostedClients.Probes() - probes0
	assert.LessOrEqual(t, hole.accepted.Load()-accepted0, probes+1, "no reconcile connects to a cluster whose circuit is open")
	assert.Equal(t, patches0, suite.requests.get(holeOD.Namespace)["PATCH"], "retries on an open circuit write no status")

	// Slow reconciles, counted per resource.
	for _, od := range healthy {
		total, slow := reconcileDurations(t, v1alpha1.ObjectDeploymentKind, od)
		assert.Positive(t, total, od.Name)
		assert.Zero(t, slow, "reconciles of healthy %s that took longer than the hosted request timeout", od.Name)
	}
	_, slow := reconcileDurations(t, v1alpha1.ObjectDeploymentKind, holeOD)
	assert.Zero(t, slow, "no reconcile waits on the hole: the first contact is the prober's")
	_, slow = reconcileDurations(t, v1alpha1.ObjectDeploymentKind, slowOD)
	assert.Positive(t, slow, "the slow cluster answers slowly, and costs its own resource the wait")

	// One Warning event per transition, however many retries.
	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(holeOD.Namespace)))
	warnings := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Name == holeOD.Name && e.Reason == v1alpha1.HostedClusterUnavailableReason {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings, "one event for the transition to HostedClusterUnavailable")

	// The second black hole's only resource is deleted: its client and circuit are forgotten,
	// and while the hole is probed three more times, it is not probed.
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), goneOD))
	eventually(t, func(a *attempt) {
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(goneOD), &v1alpha1.ObjectDeployment{})
		assert.True(a, apierrors.IsNotFound(err), "%s still there: %v", goneOD.Name, err)
	})
	goneAccepted, holeAccepted := gone.accepted.Load(), hole.accepted.Load()
	eventually(t, func(a *attempt) {
		assert.GreaterOrEqual(a, hole.accepted.Load()-holeAccepted, int64(3), "probe steps of the hole")
	})
	assert.LessOrEqual(t, gone.accepted.Load()-goneAccepted, int64(1), "at most the probe in flight when the resource went")

	// The hole starts answering: its resource recovers through the probe.
	hole.forward.Store(true)
	waitForReady(t, holeOD, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	waitForReady(t, holePkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
}

// hostedPackage pushes a package whose one phase puts a ConfigMap in the hosted cluster's
// default namespace, and creates a Package of it in namespace.
func hostedPackage(t *testing.T, namespace, name string) *v1alpha1.Package {
	t.Helper()
	files := map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: " + name +
			"\nspec:\n  phases:\n  - name: hosted\n    class: hosted-cluster\n",
		"objects.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\n  namespace: default\n"+
			"  annotations:\n    pkgsync.dev/phase: hosted\ndata:\n  owner: %s\n", name, nsCounter.Add(1), namespace),
	}
	repo := "e2e/" + namespace + "/" + name + ":v1"
	pushPackage(t, writePackage(t, files), repo)
	pkg := newPackage(namespace, name, suite.registry.Host+"/"+repo, "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	return pkg
}

// TestTeardownOpensTheCircuit: a resource is deleted after its hosted API server stopped
// answering. The first teardown pass that waits on it opens the circuit: until the teardown
// timeout lets the hosted objects go, only the prober connects to it.
func TestTeardownOpensTheCircuit(t *testing.T) {
	// Not parallel: it counts the shared controller's probes of every namespace.
	hole := newBlackHole(t, hostOf(t, suite.hosted.Config))
	hole.forward.Store(true)
	od := deadDeployment(t, "leaving", hole.server(), nil)
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	hole.cut()
	probes0, accepted0 := suite.hostedClients.Probes(), hole.accepted.Load()
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), od))
	eventually(t, func(a *attempt) {
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(od), &v1alpha1.ObjectDeployment{})
		assert.True(a, apierrors.IsNotFound(err), "%s still there: %v", od.Name, err)
	}, "let go after the teardown timeout")
	probes := suite.hostedClients.Probes() - probes0
	assert.LessOrEqual(t, hole.accepted.Load()-accepted0, probes+1, "only the first teardown pass connects; then the prober alone")
}
