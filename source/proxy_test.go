package source

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// connectProxy is an HTTP CONNECT proxy that counts the tunnels it opened, per target. It
// reaches proxyTestHost on the loopback address, as a proxy in front of a disconnected
// cluster's registry would reach it, and refuses every other target (after counting it).
type connectProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	tunnels map[string]int
}

const proxyTestHost = "registry.proxy.test"

func startConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &connectProxy{ln: ln, tunnels: map[string]int{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(conn)
		}
	}()
	return p
}

func (p *connectProxy) serve(conn net.Conn) {
	defer conn.Close()
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil || req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	host, port, err := net.SplitHostPort(req.Host)
	p.mu.Lock()
	p.tunnels[req.Host]++
	p.mu.Unlock()
	if err != nil || host != proxyTestHost {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	upstream, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer upstream.Close()
	_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}

func (p *connectProxy) count(target string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tunnels[target]
}

func (p *connectProxy) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.tunnels {
		n += c
	}
	return n
}

// TestHTTPSProxy: with HTTPS_PROXY set, the controller's client (RefuseLocalAddresses) reaches
// registries through the proxy, the proxy itself on a loopback address; NO_PROXY sends a host
// around it; and neither a proxy nor its absence lets a registry on a loopback, link-local or
// metadata address be reached. Not parallel: it sets the process's environment.
func TestHTTPSProxy(t *testing.T) {
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{TLS: true})
	ca, err := os.ReadFile(reg.CAFile)
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(reg.Host)
	require.NoError(t, err)
	img, _ := pushPackage(t, newClient(t, Options{CABundle: ca}), reg.Host, "team/pkg", nil)

	proxy := startConnectProxy(t)
	for _, env := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(env, "")
	}
	t.Setenv("HTTPS_PROXY", "http://"+proxy.ln.Addr().String())
	// The serving certificate names 127.0.0.1 and localhost, not the name the proxy reaches it
	// by: this test is about where connections go, not about TLS.
	opts := Options{RefuseLocalAddresses: true, InsecureSkipTLSVerify: true}
	c := newClient(t, opts)
	target := proxyTestHost + ":" + port
	a, err := c.Pull(t.Context(), mustRef(t, target+"/team/pkg:v1"), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, a.Digest)
	assert.Positive(t, proxy.count(target), "the pull went around the proxy")

	before := proxy.total()
	for _, local := range []string{"169.254.169.254", "[fd00:ec2::254]", "100.100.100.200", "127.0.0.1:" + port, "localhost:" + port} {
		_, err := c.Pull(t.Context(), mustRef(t, local+"/team/pkg:v1"), nil)
		require.ErrorIs(t, err, ErrLocalAddress, local)
	}
	assert.Equal(t, before, proxy.total(), "a local address was handed to the proxy")

	// NO_PROXY: the registry's name is dialled directly, and does not resolve.
	t.Setenv("NO_PROXY", proxyTestHost)
	direct := newClient(t, opts)
	before = proxy.total()
	_, err = direct.Pull(t.Context(), mustRef(t, target+"/team/pkg:v1"), nil)
	require.Error(t, err)
	assert.False(t, strings.Contains(err.Error(), "Bad Gateway"), err.Error())
	assert.Equal(t, before, proxy.total(), "NO_PROXY was not honoured")
}
