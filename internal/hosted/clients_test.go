package hosted

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"pkgsync.dev/pkgsync/apply"
)

func connectorSecret(ns string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultSecretName},
		Data:       map[string][]byte{DefaultSecretKey: data},
	}
}

// anyServer lets the tests of caching and health use servers on 127.0.0.1 without a
// HostedCluster advertising them; TestConnectorServerRestricted tests the default.
var anyServer = KubeconfigPolicy{AllowAnyServer: true}

func TestRewriteServiceHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://kube-apiserver:6443", "https://kube-apiserver.clusters-a.svc:6443"},
		{"https://kube-apiserver", "https://kube-apiserver.clusters-a.svc"},
		{"https://api.example.com:6443", "https://api.example.com:6443"},
		{"https://kube-apiserver.other.svc:6443", "https://kube-apiserver.other.svc:6443"},
	} {
		got, err := rewriteServiceHost(tc.in, "clusters-a")
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestClientsCacheRebuildAndEvict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newCapturingServer(t)
	withToken := func(token string) []byte {
		return hostileKubeconfig(t, srv.URL, pemCert(srv), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = token })
	}
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", withToken("a")), connectorSecret("clusters-b", withToken("b"))).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, IdleTTL: time.Hour})
	now := time.Now()
	c.now = func() time.Time { return now }

	ta, err := c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	assert.Equal(t, "hosted cluster clusters-a", ta.Name)
	again, err := c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	assert.Same(t, ta.Client, again.Client, "an unchanged Secret reuses the client")
	_, err = c.Target(ctx, "clusters-b", nil)
	require.NoError(t, err)
	cached, builds := c.Stats()
	assert.Equal(t, 2, cached)
	assert.Equal(t, 2, builds)
	assert.Equal(t, int64(2), c.Probes(), "one first contact per client built, none for a cached one")

	// Rotation: new data, new client.
	require.NoError(t, reader.Update(ctx, connectorSecret("clusters-a", withToken("a2"))))
	rotated, err := c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	assert.NotSame(t, ta.Client, rotated.Client)
	_, builds = c.Stats()
	assert.Equal(t, 3, builds)

	// clusters-b unused for longer than the TTL is evicted on the next use of the cache.
	now = now.Add(2 * time.Hour)
	_, err = c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	cached, _ = c.Stats()
	assert.Equal(t, 1, cached)
}

// TestClientsReadSecretDataOnlyWhenItChanges: the reader NewClients is given serves the
// connector Secret's metadata only (as the manager's metadata-only cache does), and the data
// is read through SecretDataReader once per Secret version: not on a pass that finds the
// Secret as the client was built from, again when the Secret changes (a rotation rebuilds
// the client, a change of labels alone keeps it).
func TestClientsReadSecretDataOnlyWhenItChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newCapturingServer(t)
	withToken := func(token string) []byte {
		return hostileKubeconfig(t, srv.URL, pemCert(srv), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = token })
	}
	store := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", withToken("a"))).Build()
	var metadataReads, dataReads atomic.Int32
	metadataOnly := interceptor.NewClient(store, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
			return fmt.Errorf("the cache holds no Secret data: read %T", obj)
		}
		metadataReads.Add(1)
		return c.Get(ctx, key, obj, opts...)
	}})
	data := interceptor.NewClient(store, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		dataReads.Add(1)
		return c.Get(ctx, key, obj, opts...)
	}})
	c := NewClients(metadataOnly, Options{Kubeconfig: anyServer, SecretDataReader: data})

	first, err := c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	for range 3 {
		again, err := c.Target(ctx, "clusters-a", nil)
		require.NoError(t, err)
		assert.Same(t, first.Client, again.Client)
	}
	assert.Equal(t, int32(4), metadataReads.Load(), "every pass reads the metadata")
	assert.Equal(t, int32(1), dataReads.Load(), "the data once per Secret version")

	var secret corev1.Secret
	require.NoError(t, store.Get(ctx, client.ObjectKey{Namespace: "clusters-a", Name: DefaultSecretName}, &secret))
	secret.Labels = map[string]string{"touched": "yes"}
	require.NoError(t, store.Update(ctx, &secret))
	relabelled, err := c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	assert.Same(t, first.Client, relabelled.Client, "same data, same client")
	assert.Equal(t, int32(2), dataReads.Load(), "a new version is read")

	secret.Data = map[string][]byte{DefaultSecretKey: withToken("a2")}
	require.NoError(t, store.Update(ctx, &secret))
	rotated, err := c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	assert.NotSame(t, first.Client, rotated.Client, "rotated data, new client")
	_, err = c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	assert.Equal(t, int32(3), dataReads.Load())
	_, builds := c.Stats()
	assert.Equal(t, 2, builds)

	require.NoError(t, store.Delete(ctx, &secret))
	_, err = c.Target(ctx, "clusters-a", nil)
	assert.True(t, IsNoCredentials(err), "a deleted Secret: %v", err)
}

func TestClientsWithoutCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader := fake.NewClientBuilder().WithObjects(
		connectorSecret("empty", nil),
		connectorSecret("garbage", []byte("{not a kubeconfig")),
	).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer})
	for _, ns := range []string{"missing", "empty", "garbage"} {
		_, err := c.Target(ctx, ns, nil)
		require.Error(t, err, ns)
		assert.True(t, IsNoCredentials(err), "%s: %v", ns, err)
		assert.Contains(t, err.Error(), ns)
	}
}

// namespaceCreated is when the namespace of the Departed tests was created, and secretCreated
// when its connector Secret was: after it, as every object of a namespace.
var (
	namespaceCreated = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	secretCreated    = namespaceCreated.Add(time.Minute)
)

// connectorSecretAt is connectorSecret created at created.
func connectorSecretAt(ns string, data []byte, created time.Time) *corev1.Secret {
	s := connectorSecret(ns, data)
	s.CreationTimestamp = metav1.NewTime(created)
	return s
}

// TestClientsDeparted: the client of a namespace whose connector Secret was deleted while its
// API server answered stays available to Departed for DepartedTTL, and only then; Target
// itself refuses at once, and a new Secret replaces it.
func TestClientsDeparted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newCapturingServer(t)
	kubeconfig := hostileKubeconfig(t, srv.URL, pemCert(srv), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "a" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecretAt("clusters-a", kubeconfig, secretCreated)).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer})
	now := time.Now()
	c.now = func() time.Time { return now }

	_, ok := c.Departed("clusters-a", namespaceCreated, nil)
	assert.False(t, ok, "nothing departed while the Secret is there")
	used, err := c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)

	require.NoError(t, reader.Delete(ctx, connectorSecret("clusters-a", nil)))
	_, err = c.Target(ctx, "clusters-a", nil)
	assert.True(t, IsNoCredentials(err), "Target refuses without the Secret: %v", err)
	departed, ok := c.Departed("clusters-a", namespaceCreated, nil)
	require.True(t, ok, "the last client departed with the Secret")
	assert.Same(t, used.Client, departed.Client)
	cached, _ := c.Stats()
	assert.Zero(t, cached, "a departed client is not cached for Target")

	now = now.Add(DepartedTTL + time.Second)
	_, ok = c.Departed("clusters-a", namespaceCreated, nil)
	assert.False(t, ok, "not after DepartedTTL")

	// A circuit open when the Secret goes leaves nothing behind.
	require.NoError(t, reader.Create(ctx, connectorSecretAt("clusters-a", kubeconfig, secretCreated)))
	_, err = c.Target(ctx, "clusters-a", nil)
	require.NoError(t, err)
	_ = c.MarkUnavailable("clusters-a", assert.AnError)
	require.NoError(t, reader.Delete(ctx, connectorSecret("clusters-a", nil)))
	_, err = c.Target(ctx, "clusters-a", nil)
	require.Error(t, err)
	_, ok = c.Departed("clusters-a", namespaceCreated, nil)
	assert.False(t, ok, "an unreachable client does not depart")
}

// TestClientsDepartedRefused: a departed client is served only as Target would have served it,
// to a resource of the namespace its Secret was in, and while nothing says the namespace holds
// other credentials or that its API server is gone: not after the Secret is back without
// credentials, not when the HostedCluster advertises another endpoint, not in a namespace of
// the same name created after the Secret (the old one deleted, a new tenant's made), not once it
// failed to answer.
func TestClientsDepartedRefused(t *testing.T) {
	t.Parallel()
	srv := newCapturingServer(t)
	kubeconfig := hostileKubeconfig(t, srv.URL, pemCert(srv), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "a" })
	endpoint := strings.TrimPrefix(srv.URL, "https://")
	advertising := func(ep string) *HostedCluster { return &HostedCluster{Namespace: "clusters", Name: "a", Endpoint: ep} }
	// departedClient returns Clients whose client of clusters-a, built from a kubeconfig naming
	// the endpoint the HostedCluster advertises, departed with its Secret.
	departedClient := func(t *testing.T) (*Clients, client.Client) {
		t.Helper()
		reader := fake.NewClientBuilder().WithObjects(connectorSecretAt("clusters-a", kubeconfig, secretCreated)).Build()
		c := NewClients(reader, Options{})
		_, err := c.Target(t.Context(), "clusters-a", advertising(endpoint))
		require.NoError(t, err)
		require.NoError(t, reader.Delete(t.Context(), connectorSecret("clusters-a", nil)))
		_, err = c.Target(t.Context(), "clusters-a", advertising(endpoint))
		require.True(t, IsNoCredentials(err), "%v", err)
		return c, reader
	}

	t.Run("served in its namespace", func(t *testing.T) {
		t.Parallel()
		c, _ := departedClient(t)
		_, ok := c.Departed("clusters-a", namespaceCreated, advertising(endpoint))
		assert.True(t, ok)
		_, ok = c.Departed("clusters-a", secretCreated, advertising(endpoint))
		assert.True(t, ok, "a Secret created in the namespace's second")
	})
	t.Run("the Secret is back without credentials", func(t *testing.T) {
		t.Parallel()
		c, reader := departedClient(t)
		require.NoError(t, reader.Create(t.Context(), connectorSecretAt("clusters-a", nil, secretCreated)))
		_, err := c.Target(t.Context(), "clusters-a", advertising(endpoint))
		require.True(t, IsNoCredentials(err), "%v", err)
		_, ok := c.Departed("clusters-a", namespaceCreated, advertising(endpoint))
		assert.False(t, ok, "the namespace's Secret, not the departed client, says what its credentials are")
	})
	t.Run("the HostedCluster advertises another endpoint", func(t *testing.T) {
		t.Parallel()
		c, _ := departedClient(t)
		_, ok := c.Departed("clusters-a", namespaceCreated, advertising("api.a.example.com:6443"))
		assert.False(t, ok, "checked on every use, as Target does")
		_, ok = c.Departed("clusters-a", namespaceCreated, advertising(endpoint))
		assert.False(t, ok, "and dropped")
	})
	t.Run("a namespace of the same name created since", func(t *testing.T) {
		t.Parallel()
		c, _ := departedClient(t)
		_, ok := c.Departed("clusters-a", secretCreated.Add(time.Second), advertising(endpoint))
		assert.False(t, ok, "another namespace's client")
		_, ok = c.Departed("clusters-a", namespaceCreated, advertising(endpoint))
		assert.False(t, ok, "and dropped")
	})
	t.Run("the namespace is not found", func(t *testing.T) {
		t.Parallel()
		c, _ := departedClient(t)
		_, ok := c.Departed("clusters-a", time.Time{}, advertising(endpoint))
		assert.False(t, ok, "no namespace to be the Secret's")
	})
	t.Run("its API server did not answer", func(t *testing.T) {
		t.Parallel()
		c, _ := departedClient(t)
		assert.Nil(t, c.MarkUnavailable("clusters-a", errors.New("dial tcp: i/o timeout")), "no client to open the circuit of")
		_, ok := c.Departed("clusters-a", namespaceCreated, advertising(endpoint))
		assert.False(t, ok, "the next resource of the namespace does not wait on it again")
	})
}

// countingServer is an HTTP/2 TLS server answering every request 404 (a Kubernetes Status),
// counting the connections open to it, and those ever opened (each a TLS handshake).
func countingServer(t *testing.T) (srv *httptest.Server, open, opened *atomic.Int64) {
	t.Helper()
	open, opened = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`, http.StatusNotFound)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			open.Add(1)
			opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, open, opened
}

// TestIdleConnectionIsClosed: the connection a hosted client used is closed once it carried no
// request for Options.IdleConnTimeout, so that a thousand hosted clusters between two intervals
// do not each hold an HTTP/2 connection (issue 46); it is kept while requests follow each other.
func TestIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	srv, open, opened := countingServer(t)
	kubeconfig := hostileKubeconfig(t, srv.URL, pemCert(&capturingServer{Server: srv}), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kubeconfig)).Build()
	const idle = 500 * time.Millisecond
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c := NewClients(reader, Options{Kubeconfig: anyServer, IdleConnTimeout: idle, RESTMapper: mapper})
	target, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), open.Load(), "the first contact's connection is kept for the pass that waited for it")

	get := func() {
		var cm corev1.ConfigMap
		err := target.Client.Get(t.Context(), client.ObjectKey{Namespace: "x", Name: "y"}, &cm)
		require.True(t, apierrors.IsNotFound(err), "%v", err)
	}
	// Requests closer together than the timeout share one connection, kept open.
	for range 3 {
		get()
	}
	assert.Equal(t, int64(1), open.Load(), "one connection carries the requests, and stays open between them")
	assert.Equal(t, int64(1), opened.Load(), "the first contact and the pass share one connection: one TLS handshake")
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Zero(c, open.Load(), "idle connection closed") }, 10*time.Second, 20*time.Millisecond)
	get()
	assert.Equal(t, int64(1), open.Load(), "the next request opens a new connection")
	assert.Equal(t, int64(2), opened.Load())
}

func TestReleaseClosesTheConnectionsOfSettledPasses(t *testing.T) {
	t.Parallel()
	srv, open, _ := countingServer(t)
	kubeconfig := hostileKubeconfig(t, srv.URL, pemCert(&capturingServer{Server: srv}), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kubeconfig)).Build()
	// Long enough that only Release can close a connection within the test.
	const idle = time.Hour
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c := NewClients(reader, Options{Kubeconfig: anyServer, IdleConnTimeout: idle, RESTMapper: mapper})
	pass := func() apply.Target {
		target, err := c.Target(t.Context(), "clusters-a", nil)
		require.NoError(t, err)
		var cm corev1.ConfigMap
		err = target.Client.Get(t.Context(), client.ObjectKey{Namespace: "x", Name: "y"}, &cm)
		require.True(t, apierrors.IsNotFound(err), "%v", err)
		return target
	}
	closed := func(msg string) {
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Zero(c, open.Load(), msg) }, 10*time.Second, 20*time.Millisecond)
	}
	first, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), open.Load(), "the first contact's connection waits for the pass")
	c.Release("clusters-a", first, 2*idle) // that Target's pass
	closed("a pass that settles closes the first contact's connection too")
	held := pass()

	// A pass whose next one comes sooner than the idle timeout keeps the connection.
	c.Release("clusters-a", held, time.Minute)
	assert.Equal(t, int64(1), open.Load(), "a pass due within the idle timeout reuses the connection")

	// Two passes at once: the first to settle leaves the other's connection alone.
	held = pass()
	pass()
	c.Release("clusters-a", held, 2*idle)
	assert.Equal(t, int64(1), open.Load(), "another pass still uses the client")
	// A client that is not the namespace's (one replaced while its pass ran) counts for nothing.
	c.Release("clusters-a", apply.Target{}, 2*idle)
	assert.Equal(t, int64(1), open.Load(), "the release of another client leaves this one's pass alone")
	c.Release("clusters-a", held, 2*idle)
	closed("the last settled pass closes the idle connection: the next pass is further away than the idle timeout")

	held = pass()
	assert.Equal(t, int64(1), open.Load(), "the next pass opens a new connection")
	c.Release("clusters-a", held, 2*idle)
	closed("released again")
	// Releasing more often than Target was called, or a namespace without a client, is harmless.
	c.Release("clusters-a", held, 2*idle)
	c.Release("clusters-none", held, 2*idle)
}
