package hosted

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// capturingServer is a TLS server that records the Authorization header of every request.
type capturingServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newCapturingServer(t *testing.T) *capturingServer {
	t.Helper()
	s := &capturingServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":403}`, http.StatusForbidden)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *capturingServer) sawAuthorization(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.auths {
		if sub != "" && strings.Contains(a, sub) {
			return true
		}
	}
	return false
}

// hostileKubeconfig returns a kubeconfig for server, changed by edit.
func hostileKubeconfig(t *testing.T, server string, ca []byte, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	cluster := &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	user := &clientcmdapi.AuthInfo{}
	edit(cluster, user)
	kc.Clusters["hosted"] = cluster
	kc.AuthInfos["admin"] = user
	kc.Contexts["hosted"] = &clientcmdapi.Context{Cluster: "hosted", AuthInfo: "admin"}
	kc.CurrentContext = "hosted"
	data, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	return data
}

// useHostedClient builds the client of namespace clusters-a from its connector Secret and sends
// one request with it, as a reconcile would. The HostedCluster behind the namespace advertises
// the kubeconfig's server, as HyperShift advertises its hosted API server.
func useHostedClient(t *testing.T, kubeconfig []byte, opts Options) error {
	t.Helper()
	var hc *HostedCluster
	if raw, err := clientcmd.Load(kubeconfig); err == nil && raw.Clusters["hosted"] != nil {
		if u, err := url.Parse(raw.Clusters["hosted"].Server); err == nil {
			hc = &HostedCluster{Namespace: "clusters", Name: "a", Endpoint: u.Host}
		}
	}
	return useHostedClientOf(t, kubeconfig, opts, hc)
}

// useHostedClientOf is useHostedClient with the HostedCluster behind the namespace given.
func useHostedClientOf(t *testing.T, kubeconfig []byte, opts Options, hc *HostedCluster) error {
	t.Helper()
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kubeconfig)).Build()
	c := NewClients(reader, opts)
	target, err := c.Target(t.Context(), "clusters-a", hc)
	if err != nil {
		return err
	}
	var cm corev1.ConfigMap
	_ = target.Client.Get(context.Background(), client.ObjectKey{Namespace: "x", Name: "y"}, &cm)
	return nil
}

// TestConnectorKubeconfigAttacks writes what a tenant could put in a Secret named like the
// connector Secret and checks that none of it is used.
func TestConnectorKubeconfigAttacks(t *testing.T) {
	t.Parallel()
	srv := newCapturingServer(t)
	ca := pemCert(srv)
	dir := t.TempDir()

	// The controller's own credential, as a file the attacker knows the path of.
	const stolen = "controller-service-account-token"
	tokenPath := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenPath, []byte(stolen), 0o600))
	marker := filepath.Join(dir, "exec-ran")

	for _, tc := range []struct {
		name  string
		edit  func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)
		field string
	}{
		{"exec plugin", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "sh",
				Args:            []string{"-c", "touch " + marker + `; echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x"}}'`},
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		}, `users["admin"].exec`},
		{"token file", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.TokenFile = tokenPath }, `users["admin"].tokenFile`},
		{"client certificate file", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificate, u.ClientKey = tokenPath, tokenPath
		}, `users["admin"].client-certificate`},
		{"client key file", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientKey = tokenPath }, `users["admin"].client-key`},
		{"certificate authority file", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthority, c.CertificateAuthorityData = tokenPath, nil
		}, `clusters["hosted"].certificate-authority`},
		{"insecure TLS", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
			u.Token = "inline"
		}, `clusters["hosted"].insecure-skip-tls-verify`},
		{"plain http", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = strings.Replace(c.Server, "https://", "http://", 1)
		}, `clusters["hosted"].server`},
		{"server without a scheme", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.Server = strings.TrimPrefix(c.Server, "https://")
			u.Token = "in-the-clear"
		}, `clusters["hosted"].server`},
		{"proxy", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.ProxyURL = "socks5://127.0.0.1:1" }, `clusters["hosted"].proxy-url`},
		{"auth provider", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": "x"}}
		}, `users["admin"].auth-provider`},
		// Impersonation would run the kubeconfig with less privilege than its credential has;
		// dropped silently, the credential's own (system:masters) would be used instead.
		{"impersonated user", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.Impersonate = "inline", "system:serviceaccount:addon:installer"
		}, `users["admin"].as`},
		{"impersonated groups", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.ImpersonateGroups = "inline", []string{"addon-installers"}
		}, `users["admin"].as-groups`},
		{"impersonated UID", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.ImpersonateUID = "inline", "1234"
		}, `users["admin"].as-uid`},
		{"impersonated user extra", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.ImpersonateUserExtra = "inline", map[string][]string{"scopes": {"read"}}
		}, `users["admin"].as-user-extra`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := useHostedClient(t, hostileKubeconfig(t, srv.URL, ca, tc.edit), Options{})
			require.Error(t, err, "the kubeconfig must be refused")
			assert.True(t, IsInsecureKubeconfig(err), "%v", err)
			assert.Contains(t, err.Error(), tc.field)
			assert.Contains(t, err.Error(), "clusters-a/"+DefaultSecretName)
			assert.NotContains(t, err.Error(), stolen, "a file's content never shows in the error")
		})
	}
	assert.NoFileExists(t, marker, "the exec plugin must never run")
	assert.False(t, srv.sawAuthorization(stolen), "the controller's token file must never be sent")
}

// TestConnectorKubeconfigOptIns checks the controller flags that loosen the policy.
func TestConnectorKubeconfigOptIns(t *testing.T) {
	t.Parallel()
	srv := newCapturingServer(t)
	marker := filepath.Join(t.TempDir(), "exec-ran")
	execKC := hostileKubeconfig(t, srv.URL, pemCert(srv), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "sh",
			Args: []string{"-c", "touch " + marker + `; echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}'`}}
	})
	require.NoError(t, useHostedClient(t, execKC, Options{Kubeconfig: KubeconfigPolicy{AllowExec: true}}))
	assert.FileExists(t, marker, "--insecure-kubeconfig-exec runs the plugin")
	assert.True(t, srv.sawAuthorization("from-exec"))

	insecureKC := hostileKubeconfig(t, srv.URL, nil, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.InsecureSkipTLSVerify = true
		u.Token = "over-unverified-tls"
	})
	require.NoError(t, useHostedClient(t, insecureKC, Options{Kubeconfig: KubeconfigPolicy{AllowInsecureTLS: true}}))
	assert.True(t, srv.sawAuthorization("over-unverified-tls"), "--insecure-kubeconfig-tls skips verification")

	// Inline credentials over verified TLS need no flag.
	inline := hostileKubeconfig(t, srv.URL, pemCert(srv), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "inline-token" })
	require.NoError(t, useHostedClient(t, inline, Options{}))
	assert.True(t, srv.sawAuthorization("inline-token"))
}

// TestConnectorServerRestricted: a connector kubeconfig, which whoever may write Secrets of
// its name in the namespace writes, may name only the hosted API server of the namespace: the
// Service kube-apiserver there or the endpoint its HostedCluster advertises. Any other server
// (an in-cluster service, another namespace's API server) is refused before anything is sent.
func TestConnectorServerRestricted(t *testing.T) {
	t.Parallel()
	srv := newCapturingServer(t)
	kc := hostileKubeconfig(t, srv.URL, pemCert(srv), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	endpoint := strings.TrimPrefix(srv.URL, "https://")
	advertising := func(ep string) *HostedCluster { return &HostedCluster{Namespace: "clusters", Name: "a", Endpoint: ep} }

	for _, tc := range []struct {
		name string
		hc   *HostedCluster
	}{
		{"no HostedCluster", nil},
		{"HostedCluster advertising no endpoint", advertising("")},
		{"HostedCluster advertising another endpoint", advertising("api.a.example.com:6443")},
		{"HostedCluster advertising the host on another port", advertising(net.JoinHostPort(srv.Listener.Addr().(*net.TCPAddr).IP.String(), "6443"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := useHostedClientOf(t, kc, Options{}, tc.hc)
			require.Error(t, err)
			assert.True(t, IsInsecureKubeconfig(err), "%v", err)
			assert.Contains(t, err.Error(), `clusters["hosted"].server`)
			assert.Contains(t, err.Error(), "kube-apiserver.clusters-a.svc")
			assert.Contains(t, err.Error(), "--insecure-kubeconfig-any-server")
		})
	}
	srv.mu.Lock()
	sent := len(srv.auths)
	srv.mu.Unlock()
	assert.Zero(t, sent, "nothing, not even a probe, is sent to a refused server")

	require.NoError(t, useHostedClientOf(t, kc, Options{}, advertising(endpoint)), "the advertised endpoint is accepted")
	require.NoError(t, useHostedClientOf(t, kc, Options{Kubeconfig: KubeconfigPolicy{AllowAnyServer: true}}, nil), "--insecure-kubeconfig-any-server accepts any server")

	// A client already built is checked again on every use: the endpoint may change.
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kc)).Build()
	c := NewClients(reader, Options{})
	_, err := c.Target(t.Context(), "clusters-a", advertising(endpoint))
	require.NoError(t, err)
	_, err = c.Target(t.Context(), "clusters-a", advertising("api.a.example.com:6443"))
	assert.True(t, IsInsecureKubeconfig(err), "%v", err)
	cached, _ := c.Stats()
	assert.Zero(t, cached, "the refused client is dropped, and its prober with it")

	for _, tc := range []struct {
		server string
		ok     bool
	}{
		{"https://kube-apiserver:6443", true},
		{"https://kube-apiserver:2040", true},
		{"https://kube-apiserver.clusters-a.svc:6443", true},
		{"https://KUBE-APISERVER.clusters-a.svc.cluster.local", true},
		{"https://kube-apiserver.clusters-b.svc:6443", false},
		{"https://kube-apiserver.clusters-b.svc.cluster.local:6443", false},
		{"https://kube-apiserver.clusters-a.svc.evil.example.com:6443", false},
		{"https://pkgsync-metrics.pkgsync-system.svc:8443", false},
		{"https://169.254.169.254", false},
		{"https://api.a.example.com:6443", true},
		{"https://api.a.example.com", false},
		{"https://api.a.example.com:443", false},
	} {
		refused := checkServer(tc.server, `clusters["c"].server`, "clusters-a", advertising("api.a.example.com:6443"), KubeconfigPolicy{})
		assert.Equal(t, tc.ok, refused == nil, "%s: %v", tc.server, refused)
	}
}

// FuzzConnectorKubeconfig checks that whatever a Secret holds, a config that is accepted
// carries no file reference, plugin, proxy or disabled verification.
func FuzzConnectorKubeconfig(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://h:6443\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: t\n",
		"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://h\n    certificate-authority: /etc/ssl/ca.pem\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
		"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://h\n    insecure-skip-tls-verify: true\n    proxy-url: http://p:3128\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, id]}\n",
		"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate: /tmp/c\n    client-key: /tmp/k\n    auth-provider: {name: oidc}\n",
		"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: t\n    as: someone\n    as-groups: [g]\n",
		"{}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := restConfigFromKubeconfig(data, KubeconfigPolicy{})
		if err != nil {
			return
		}
		if cfg.BearerTokenFile != "" || cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" ||
			cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.Insecure || cfg.Proxy != nil ||
			cfg.Impersonate.UserName != "" || len(cfg.Impersonate.Groups) > 0 || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Extra) > 0 ||
			!strings.HasPrefix(cfg.Host, "https://") {
			t.Fatalf("accepted an unsafe config: %+v", cfg)
		}
	})
}

// pemCert returns the test server's certificate as a PEM CA bundle.
func pemCert(s *capturingServer) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// TestHostedResponseBodyNeverInErrors: whatever a server named by a connector kubeconfig answers
// that is not a Kubernetes API object (an in-cluster service's page, an HTML error) never reaches
// an error, which becomes a status message that the Secret's writer reads. The status code does.
func TestHostedResponseBodyNeverInErrors(t *testing.T) {
	t.Parallel()
	const marker = "s3cr3t-internal-page"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			_, _ = w.Write([]byte("ok"))
			return
		case "/api/v1":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"configmaps","namespaced":true,"kind":"ConfigMap","verbs":["get"]}]}`))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("<html><body>internal dashboard: " + marker + "</body></html>"))
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := hostileKubeconfig(t, srv.URL, ca, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kc)).Build()
	c := NewClients(reader, Options{Kubeconfig: anyServer})
	target, err := c.Target(t.Context(), "clusters-a", nil)
	require.NoError(t, err)

	var cm corev1.ConfigMap
	err = target.Client.Get(t.Context(), client.ObjectKey{Namespace: "x", Name: "y"}, &cm)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), marker)
	assert.Contains(t, err.Error(), "HTTP 500")
	assert.Contains(t, err.Error(), "not shown")
}

// TestHostedRedirectNotFollowed: a hosted API server's redirect is not followed, so an accepted
// server cannot send the controller's requests on to a server that would be refused.
func TestHostedRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"y","namespace":"x"}}`))
	}))
	t.Cleanup(target.Close)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			_, _ = w.Write([]byte("ok"))
		case "/api/v1":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"configmaps","namespaced":true,"kind":"ConfigMap","verbs":["get"]}]}`))
		default:
			http.Redirect(w, r, target.URL+r.URL.Path, http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := hostileKubeconfig(t, srv.URL, ca, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "t" })
	reader := fake.NewClientBuilder().WithObjects(connectorSecret("clusters-a", kc)).Build()
	c := NewClients(reader, Options{})
	hc := &HostedCluster{Namespace: "clusters", Name: "a", Endpoint: strings.TrimPrefix(srv.URL, "https://")}
	tgt, err := c.Target(t.Context(), "clusters-a", hc)
	require.NoError(t, err)
	var cm corev1.ConfigMap
	err = tgt.Client.Get(t.Context(), client.ObjectKey{Namespace: "x", Name: "y"}, &cm)
	assert.Error(t, err, "a redirect is an error, not an object")
	assert.Zero(t, elsewhere.Load(), "nothing is sent where the redirect points")
}
