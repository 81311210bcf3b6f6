package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/receiver"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/wakes"
	"pkgsync.dev/pkgsync/test/testenv"
)

// countingRegistry is the suite's registry under another host (a reverse proxy on a port of its
// own), counting the tag resolutions (HEAD of a manifest) sent to that host.
type countingRegistry struct {
	host  string
	heads atomic.Int64
}

func newCountingRegistry(t *testing.T) *countingRegistry {
	t.Helper()
	c := &countingRegistry{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: suite.registry.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
			c.heads.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.host = strings.TrimPrefix(srv.URL, "http://")
	return c
}

// TestNotificationKeyBoundToRegistry: a source's key is bound to the registries it is for
// (receiver.Options.Registries, --webhook-registry). Registry A notifies with the distribution
// key, bound to A; a notification names only a path, and B has a repository of the same path
// followed by a Package: A's push (and a notification posted with A's key) wakes A's follower
// and sends B nothing.
func TestNotificationKeyBoundToRegistry(t *testing.T) {
	t.Parallel()
	const shard = "notify-host"
	ns := newNamespace(t)
	key := "dist-" + ns
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pkgsync-webhook"},
		Data: map[string][]byte{"distribution": []byte(key)}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), secret))
	wakes := wakes.NewRegistryWakes()
	runShardController(t, shard, func(o *reconciler.Options) { o.Wakes = wakes })

	// The receiver is made once A's host is known; until then it answers 503.
	var handler atomic.Pointer[receiver.Receiver]
	listening := make(chan net.Addr, 1)
	srv := &receiver.Server{Addr: "127.0.0.1:0", Listening: func(a net.Addr) { listening <- a },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h := handler.Load(); h != nil {
				h.ServeHTTP(w, r)
				return
			}
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		})}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-served) })
	var base string
	select {
	case addr := <-listening:
		base = "http://" + addr.String()
	case err := <-served:
		require.NoError(t, err)
	}
	a := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true, NotifyURL: base + receiver.PathPrefix + "distribution", NotifyToken: key})
	b := newCountingRegistry(t)
	metrics := prometheus.NewRegistry()
	m, err := receiver.NewMetrics(metrics)
	require.NoError(t, err)
	handler.Store(receiver.New(receiver.Options{
		Keys:       &receiver.SecretKeys{Reader: suite.mgmtClient, Secret: client.ObjectKeyFromObject(secret)},
		Waker:      wakes,
		Metrics:    m,
		Registries: map[receiver.Source][]string{receiver.Distribution: {a.Host}},
	}))

	repo := "e2e/" + ns + "/app"
	follow := func(image string) (*v1alpha1.Package, string) {
		digest := pushPackageTo(t, writePackage(t, versionedPackage("1")), image)
		pkg := newPackage(newNamespace(t), "follower", image, "")
		pkg.Labels = map[string]string{shardLabel: shard}
		createPackage(t, pkg)
		waitReadyOnDigest(t, pkg, digest)
		return pkg, digest
	}
	onA, _ := follow(a.Host + "/" + repo + ":v1")
	onB, digestB := follow(b.host + "/" + repo + ":v1")
	headsB := b.heads.Load()

	// A's push, notified by A with its key, wakes A's follower (it converges within the
	// test, its interval being an hour), and B is asked nothing.
	second := pushPackageTo(t, writePackage(t, versionedPackage("2")), a.Host+"/"+repo+":v1")
	waitReadyOnDigest(t, onA, second)

	// A notification posted with A's key, naming the path B has too.
	envelope := `{"events":[{"action":"push","target":{"repository":"` + repo + `","tag":"v1"}}]}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+receiver.PathPrefix+"distribution", strings.NewReader(envelope))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	// The wake of A's follower by this notification shows as a resolution of A's tag; B's
	// follower, woken by the same call if at all, would have resolved by then.
	waitReadyOnDigest(t, onA, second)

	assert.Equal(t, headsB, b.heads.Load(), "A's key wakes nobody following B")
	t.Cleanup(func() { assert.Equal(t, headsB, b.heads.Load(), "nor later") })
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(onB), onB))
	assert.Equal(t, digestB, onB.Status.LastAppliedRevision)
}
