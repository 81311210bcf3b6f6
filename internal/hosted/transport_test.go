package hosted

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// freezingRelay forwards TCP connections to target until frozen; then it keeps them open and
// drops every byte both ways, as a dead tunnel does.
type freezingRelay struct {
	listener net.Listener
	frozen   atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
}

func newFreezingRelay(t *testing.T, target string) *freezingRelay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &freezingRelay{listener: l}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !r.frozen.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.conns {
			c.Close()
		}
	})
	return r
}

// TestDeadConnectionIsFoundByTheHealthCheck: a hosted client's requests go over HTTP/2, its
// first contact's probe too (over the connection the requests then use). A hosted API server whose tunnel dies with a
// connection open (TCP still up, nothing answered) fails the request on it within two dial
// timeouts: the HTTP/2 health check pings a connection silent for DialTimeout and closes it
// when the ping goes unanswered for as long. client-go's defaults (30 s, then 15 s) would let
// the request wait for its own timeout, a minute here; and a closed connection would stay in
// memory as long (transport.go).
func TestDeadConnectionIsFoundByTheHealthCheck(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	protos := map[string]string{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.URL.Path] = r.Proto
		mu.Unlock()
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`, http.StatusNotFound)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	relay := newFreezingRelay(t, srv.Listener.Addr().String())
	kubeconfig := hostileKubeconfig(t, "https://"+relay.listener.Addr().String(), pemCert(&capturingServer{Server: srv}), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kubeconfig)).Build()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	const dial = 300 * time.Millisecond
	c := NewClients(reader, Options{Kubeconfig: anyServer, Timeout: time.Minute, DialTimeout: dial, IdleConnTimeout: time.Hour, RESTMapper: mapper})
	target, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)
	get := func() error {
		var cm corev1.ConfigMap
		return target.Client.Get(t.Context(), client.ObjectKey{Namespace: "x", Name: "y"}, &cm)
	}
	err = get()
	require.True(t, apierrors.IsNotFound(err), "the connection works: %v", err)
	mu.Lock()
	assert.Equal(t, map[string]string{"/readyz": "HTTP/2.0", "/api/v1/namespaces/x/configmaps/y": "HTTP/2.0"}, protos)
	mu.Unlock()

	relay.frozen.Store(true)
	done := make(chan error, 1)
	go func() { done <- get() }()
	// Far longer than two dial timeouts, far shorter than the request timeout or client-go's 45 s.
	wait := time.NewTimer(20 * time.Second)
	defer wait.Stop()
	select {
	case err := <-done:
		require.Error(t, err)
		require.False(t, apierrors.IsNotFound(err), "no answer came through the dead tunnel: %v", err)
	case <-wait.C:
		t.Fatal("the request on a dead connection still waits: the HTTP/2 health check did not close it")
	}
}

// TestKubeconfigWithoutTLSSettings: a connector kubeconfig with no CA data, no client
// certificate and no TLS options leaves client-go without a TLS configuration (the system's
// roots verify the server); building its client must not assume one.
func TestKubeconfigWithoutTLSSettings(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	kubeconfig := hostileKubeconfig(t, srv.URL, nil, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthorityData = nil
		u.Token = "t"
	})
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kubeconfig)).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, FirstContactWait: time.Second})
	// The test server's certificate is not among the system's roots: the first contact fails,
	// and that is all.
	_, err := c.Target(t.Context(), "clusters-a", nil)
	require.Error(t, err)
}

// TestClientCertificateAuthenticates: a connector kubeconfig's client certificate (how
// HyperShift's connector kubeconfigs authenticate) is presented in the handshake to a server
// that requires one, although the client keeps it without its parsed leaf.
func TestClientCertificateAuthenticates(t *testing.T) {
	t.Parallel()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	userKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	userDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "system:admin"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, &userKey.PublicKey, caKey)
	require.NoError(t, err)
	userKeyDER, err := x509.MarshalECPrivateKey(userKey)
	require.NoError(t, err)

	var authenticated atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 && r.TLS.PeerCertificates[0].Subject.CommonName == "system:admin" {
			authenticated.Add(1)
		}
		_, _ = w.Write([]byte("ok"))
	}))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	serverCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kubeconfig := hostileKubeconfig(t, srv.URL, serverCA, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.ClientCertificateData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: userDER})
		u.ClientKeyData = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: userKeyDER})
	})
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kubeconfig)).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer, FirstContactWait: 5 * time.Second})
	_, err = c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err, "the first contact authenticated with the client certificate")
	assert.Positive(t, authenticated.Load())

	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: serverCA,
		CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: userDER}),
		KeyData:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: userKeyDER})}}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	require.NoError(t, err)
	keepParsedCertificateOnly(tlsConfig, cfg)
	cert, err := tlsConfig.GetClientCertificate(nil)
	require.NoError(t, err)
	assert.Nil(t, cert.Leaf, "the parsed leaf is not kept")
	assert.Equal(t, [][]byte{userDER}, cert.Certificate)
}
