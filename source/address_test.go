package source

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// trap is a server on loopback that counts what reaches it: what a reference written by a
// tenant aims at (the controller's metrics, health or pprof port).
func trap(t *testing.T) (port string, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	return port, hits
}

// With RefuseLocalAddresses, a registry on a loopback, link-local or unspecified address is
// refused before anything is sent, whatever names it: an IP literal, localhost, [::1].
func TestRefuseLocalAddresses(t *testing.T) {
	t.Parallel()
	port, hits := trap(t)
	c := newClient(t, Options{RefuseLocalAddresses: true})
	for _, host := range []string{
		"127.0.0.1:" + port,
		"127.1.2.3:" + port,
		"localhost:" + port,
		"LocalHost:" + port,
		"[::1]:" + port,
		"[::ffff:127.0.0.1]:" + port,
		"0.0.0.0:" + port,
		"169.254.169.254:" + port,
		"[fe80::1]:" + port,
	} {
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			_, err := c.Resolve(t.Context(), mustRef(t, host+"/x:y"), nil)
			require.ErrorIs(t, err, ErrLocalAddress)
			assert.Regexp(t, `is (a loopback|a link-local|the unspecified) address`, err.Error())
			assert.Contains(t, err.Error(), "https://", "a loopback registry is not plain HTTP unasked")
		})
	}
	assert.Zero(t, hits.Load(), "nothing reached the loopback server")
	assert.False(t, c.plainHTTP("127.0.0.1:"+port))
	assert.False(t, c.plainHTTP("localhost:"+port))

	// Without it (the CLI), loopback registries are plain HTTP, as docker's and oras' are.
	cli := newClient(t, Options{})
	assert.True(t, cli.plainHTTP("127.0.0.1:"+port))
	_, err := cli.Resolve(t.Context(), mustRef(t, "127.0.0.1:"+port+"/x:y"), nil)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrLocalAddress)
	assert.Positive(t, hits.Load())
}

// A registry the operator names may be on a loopback address: over plain HTTP with
// PlainHTTPHosts, over HTTPS with LocalHosts. Naming host:port allows that port only, and a
// name is not the address it resolves to.
func TestLocalHostsAllowed(t *testing.T) {
	t.Parallel()
	plain := testenv.NewRegistry(t, testenv.RegistryOptions{})
	secure := testenv.NewRegistry(t, testenv.RegistryOptions{TLS: true})
	ca, err := os.ReadFile(secure.CAFile)
	require.NoError(t, err)
	_, plainRef := pushPackage(t, newClient(t, Options{}), plain.Host, "local", nil)
	_, secureRef := pushPackage(t, newClient(t, Options{CABundle: ca}), secure.Host, "local", nil)

	c := newClient(t, Options{RefuseLocalAddresses: true, PlainHTTPHosts: []string{plain.Host}, LocalHosts: []string{secure.Host}, CABundle: ca})
	_, err = c.Resolve(t.Context(), plainRef, nil)
	require.NoError(t, err, "listed as a plain HTTP registry")
	_, err = c.Resolve(t.Context(), secureRef, nil)
	require.NoError(t, err, "listed as a local registry")

	_, port, err := net.SplitHostPort(secure.Host)
	require.NoError(t, err)
	byName := mustRef(t, "localhost:"+port+"/local:v1")
	_, err = c.Resolve(t.Context(), byName, nil)
	require.ErrorIs(t, err, ErrLocalAddress, "localhost is not the listed 127.0.0.1")

	anyPort := newClient(t, Options{RefuseLocalAddresses: true, LocalHosts: []string{"localhost"}, CABundle: ca})
	_, err = anyPort.Resolve(t.Context(), byName, nil)
	require.NoError(t, err, "a host without a port is allowed on any port")
}

// A listed registry cannot lead the client to another local address: a redirect and a token
// realm on loopback are refused as they are dialled.
func TestRefuseLocalAddressesOnRedirectAndRealm(t *testing.T) {
	t.Parallel()
	port, hits := trap(t)
	cases := map[string]http.HandlerFunc{
		"redirect": func(w http.ResponseWriter, req *http.Request) {
			http.Redirect(w, req, fmt.Sprintf("http://localhost:%s%s", port, req.URL.Path), http.StatusTemporaryRedirect)
		},
		"token realm": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://127.0.0.1:%s/token",service="registry"`, port))
			w.WriteHeader(http.StatusUnauthorized)
		},
	}
	for name, handler := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(handler)
			t.Cleanup(srv.Close)
			host := strings.TrimPrefix(srv.URL, "http://")
			c := newClient(t, Options{RefuseLocalAddresses: true, PlainHTTPHosts: []string{host}})
			_, err := c.Resolve(t.Context(), mustRef(t, host+"/x:y"), nil)
			require.ErrorIs(t, err, ErrLocalAddress)
		})
	}
	assert.Zero(t, hits.Load(), "nothing reached the loopback server")
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	hosts := []string{"registry.local:5000", "localhost", "[::1]:5000", "[fe80::1]"}
	for addr, want := range map[string]bool{
		"registry.local:5000": true,
		"REGISTRY.local:5000": true,
		"registry.local:443":  false,
		"localhost:8080":      true,
		"[::1]:5000":          true,
		"[::1]:8080":          false,
		"[fe80::1]:443":       true,
		"127.0.0.1:5000":      false,
		"garbage":             false,
	} {
		assert.Equal(t, want, hostAllowed(hosts, addr), addr)
	}
}
