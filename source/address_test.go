package source

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
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
	_, plainRef := pushPackage(t, newClient(t, Options{}), plain.Host, testenv.Repository(t, "local"), nil)
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

// machineAddress is an address of this machine that is neither loopback nor link-local: what a
// pod's own IP is to the controller.
func machineAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address")
	return ""
}

// ownPort is a server on every interface of this machine that counts what reaches it, as the
// controller's metrics, health and pprof ports do (--metrics-bind-address=:8080).
func ownPort(t *testing.T, tls bool) (port string, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	l, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	srv.Listener = l
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	_, port, err = net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	return port, hits
}

// A registry the operator allowed (on this machine's own address, so that the test needs no
// other) redirects the client to this machine's own ports: over plain HTTP the redirect is
// refused before it is followed, over HTTPS when it is dialled.
func TestRefuseRedirectToOwnAddress(t *testing.T) {
	t.Parallel()
	ip := machineAddress(t)
	plainPort, plainHits := ownPort(t, false)
	tlsPort, tlsHits := ownPort(t, true)
	for _, tt := range []struct {
		name, registryScheme, target, want string
	}{
		{"https to plain http", "https", "http://" + net.JoinHostPort(ip, plainPort), "leaves HTTPS for plain HTTP"},
		{"http to an unlisted plain http host", "http", "http://" + net.JoinHostPort(ip, plainPort), "plain HTTP to a registry not listed"},
		{"https to this machine's address", "https", "https://" + net.JoinHostPort(ip, tlsPort), "is an address of this machine"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hostile := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tt.target+"/debug/pprof/profile?seconds=1", http.StatusTemporaryRedirect)
			}))
			l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
			require.NoError(t, err)
			hostile.Listener = l
			opts := Options{RefuseLocalAddresses: true}
			if tt.registryScheme == "https" {
				hostile.StartTLS()
				// A registry with a publicly trusted certificate, stood in for by skipping
				// verification (which changes nothing of the address checks).
				opts.InsecureSkipTLSVerify = true
				opts.LocalHosts = []string{l.Addr().String()}
			} else {
				hostile.Start()
				opts.PlainHTTPHosts = []string{l.Addr().String()}
			}
			t.Cleanup(hostile.Close)
			c := newClient(t, opts)
			ref := mustRef(t, l.Addr().String()+"/x@sha256:"+strings.Repeat("0", 64))
			err = c.Authorize(t.Context(), ref, nil)
			require.ErrorIs(t, err, ErrLocalAddress)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	assert.Zero(t, plainHits.Load(), "requests that reached a plain HTTP port of this machine")
	assert.Zero(t, tlsHits.Load(), "requests that reached an HTTPS port of this machine")
}

// This machine's own addresses are refused like loopback, unless the operator listed the host.
func TestRefuseOwnAddresses(t *testing.T) {
	t.Parallel()
	ip := machineAddress(t)
	port, hits := ownPort(t, false)
	host := net.JoinHostPort(ip, port)
	_, err := newClient(t, Options{RefuseLocalAddresses: true}).Resolve(t.Context(), mustRef(t, host+"/x:y"), nil)
	require.ErrorIs(t, err, ErrLocalAddress)
	assert.Contains(t, err.Error(), "is an address of this machine")
	assert.Zero(t, hits.Load())

	_, err = newClient(t, Options{RefuseLocalAddresses: true, PlainHTTPHosts: []string{host}}).Resolve(t.Context(), mustRef(t, host+"/x:y"), nil)
	require.NotErrorIs(t, err, ErrLocalAddress, "a listed host is reached")
	assert.Equal(t, int64(1), hits.Load())
}

// Cloud metadata services that are neither loopback nor link-local, and NAT64 spellings of
// local addresses (an IPv6-only cluster behind DNS64/NAT64), are refused as they are dialled.
func TestRefuseMetadataAddresses(t *testing.T) {
	t.Parallel()
	own := []netip.Addr{netip.MustParseAddr("10.1.2.3")}
	for addr, want := range map[string]string{
		"[fd00:ec2::254]:80":      "a cloud metadata address",
		"[fd20:ce::254]:80":       "a cloud metadata address",
		"100.100.100.200:80":      "a cloud metadata address",
		"169.254.169.254:80":      "a link-local address",
		"[64:ff9b::a9fe:a9fe]:80": "NAT64 for 169.254.169.254, a link-local address",
		"[64:ff9b::7f00:1]:80":    "NAT64 for 127.0.0.1, a loopback address",
		"[64:ff9b::6464:64c8]:80": "NAT64 for 100.100.100.200, a cloud metadata address",
		"[64:ff9b::a01:203]:443":  "NAT64 for 10.1.2.3, an address of this machine",
		"[64:ff9b::]:80":          "NAT64 for 0.0.0.0, the unspecified address",
		"10.1.2.3:8080":           "an address of this machine",
		"[::ffff:10.1.2.3]:8080":  "an address of this machine",
		"[fe80::1%eth0]:80":       "a link-local address",
		"10.1.2.4:443":            "",
		"100.100.100.201:443":     "",
		"[fd00:ec2::253]:443":     "",
		"[64:ff9b::808:808]:443":  "",
		"[2001:db8::254]:443":     "",
	} {
		err := refuseLocal(addr, own)
		if want == "" {
			assert.NoError(t, err, addr)
			continue
		}
		assert.ErrorIs(t, err, ErrLocalAddress, addr)
		assert.ErrorContains(t, err, want, addr)
	}
}

// The dial check lives in the transport NewClient builds: a Transport of the caller's would
// bypass it, so the two are refused together.
func TestNewClientRefusesTransportWithRefuseLocalAddresses(t *testing.T) {
	t.Parallel()
	_, err := NewClient(Options{RefuseLocalAddresses: true, Transport: http.DefaultTransport})
	require.ErrorContains(t, err, "RefuseLocalAddresses")
}

// The CLI (without RefuseLocalAddresses) reaches a registry on loopback when the user names one,
// as docker and oras do, but a registry elsewhere cannot send it there: a redirect from a
// registry that is not on a local address to a loopback, link-local, unspecified or metadata
// address is refused as it is dialled, whether the redirect names the address or a host name
// that resolves to it. A loopback registry may still redirect to loopback storage.
func TestCLIRefusesRedirectFromRemoteToLocal(t *testing.T) {
	t.Parallel()
	ip := machineAddress(t)
	port, hits := trap(t)
	for _, target := range []string{"http://127.0.0.1:" + port, "http://localhost:" + port} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			remote := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
			}))
			l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
			require.NoError(t, err)
			remote.Listener = l
			remote.Start()
			t.Cleanup(remote.Close)
			// The CLI's options: plain HTTP for the registry the user named (--plain-http).
			c := newClient(t, Options{PlainHTTPHosts: []string{l.Addr().String()}})
			ref := mustRef(t, l.Addr().String()+"/x@sha256:"+strings.Repeat("0", 64))
			err = c.Authorize(t.Context(), ref, nil)
			require.ErrorIs(t, err, ErrLocalAddress)
		})
	}
	t.Run("loopback to loopback", func(t *testing.T) {
		t.Parallel()
		storage, storageHits := trap(t)
		local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://localhost:"+storage+r.URL.Path, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(local.Close)
		c := newClient(t, Options{})
		ref := mustRef(t, strings.TrimPrefix(local.URL, "http://")+"/x@sha256:"+strings.Repeat("0", 64))
		err := c.Authorize(t.Context(), ref, nil)
		assert.NotErrorIs(t, err, ErrLocalAddress)
		assert.Positive(t, storageHits.Load(), "a loopback registry's redirect to loopback is followed")
	})
	t.Cleanup(func() { assert.Zero(t, hits.Load(), "requests a remote registry sent to loopback") })
}
