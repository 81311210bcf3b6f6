package source

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"

	"golang.org/x/net/http/httpproxy"
)

// HTTP proxies. The client reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY (and their lower-case
// forms) once, in NewClient, as net/http's default transport does. Go never proxies localhost
// or a loopback IP: those are dialled, and checked as they are dialled.
//
// With a proxy, what the controller dials is the proxy, so the dial-time address check of
// RefuseLocalAddresses sees the proxy's address, not the registry's. Two things keep a proxy
// from bypassing that check: a registry named by an IP address is checked before the request
// is handed to the proxy (a link-local or metadata address, 169.254.169.254 say, is refused
// however it would be reached), and the proxy's own address, which the operator chose, is the
// only local address dialled without being listed. A registry named by a host name is resolved
// by the proxy, on the proxy's machine: refusing names that resolve to its own or metadata
// addresses is the proxy's job.

// proxyFunc returns the transport's Proxy: the environment's, refusing under
// RefuseLocalAddresses a registry on a local IP address before it reaches the proxy.
func (o *Options) proxyFunc(env *httpproxy.Config) func(*http.Request) (*url.URL, error) {
	fromEnv := env.ProxyFunc()
	allowed := append(append([]string{}, o.PlainHTTPHosts...), o.LocalHosts...)
	own := ownAddresses()
	return func(req *http.Request) (*url.URL, error) {
		proxy, err := fromEnv(req.URL)
		if err != nil || proxy == nil || !o.RefuseLocalAddresses {
			return proxy, err
		}
		addr := canonicalAddr(req.URL)
		if hostAllowed(allowed, addr) {
			return proxy, nil
		}
		host, _, _ := net.SplitHostPort(addr)
		if ip, err := netip.ParseAddr(host); err == nil {
			if err := refuseLocal(net.JoinHostPort(ip.String(), "0"), own); err != nil {
				return nil, fmt.Errorf("%s, through the proxy %s: %w", req.URL.Host, proxy.Redacted(), err)
			}
		}
		return proxy, nil
	}
}

// proxyAddresses returns the host:port of the proxies env names, which the dial check lets
// through: the operator configured them.
func proxyAddresses(env *httpproxy.Config) []string {
	var out []string
	for _, raw := range []string{env.HTTPProxy, env.HTTPSProxy} {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			// httpproxy reads "host:port" without a scheme as http://host:port.
			if u, err = url.Parse("http://" + raw); err != nil || u.Host == "" {
				continue
			}
		}
		out = append(out, canonicalAddr(u))
	}
	return out
}

// canonicalAddr is u's host:port, the port defaulted from the scheme.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
