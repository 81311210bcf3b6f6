package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrLocalAddress: the registry, a redirect or a token realm is on a loopback, link-local,
// unspecified or cloud metadata address, or on one of this machine's own addresses, or a redirect
// leads to plain HTTP; Options.RefuseLocalAddresses refuses these unless the host is listed.
var ErrLocalAddress = errors.New("registries on loopback, link-local, metadata or this machine's own addresses, and redirects to plain HTTP, are not allowed")

// metadataAddresses are cloud metadata services that are neither loopback nor link-local
// (169.254.169.254 is link-local): AWS' and GCE's over IPv6, Alibaba Cloud's.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("fd20:ce::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// nat64Prefix is the well-known NAT64 prefix (RFC 6052): behind DNS64/NAT64, 64:ff9b::a9fe:a9fe
// reaches 169.254.169.254.
var nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")

// dialer returns the DialContext of the transport NewClient builds: net/http's default dialer,
// refusing local addresses (checked on the IP each attempt connects to) for hosts the options do
// not allow, when they say so, nor the proxies (host:port) the environment names (proxy.go).
// This machine's own addresses are read once, here: a pod's do not change while it runs.
func (o *Options) dialer(proxies []string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	// net/http's DefaultTransport dialer.
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !o.RefuseLocalAddresses {
		// The CLI: local addresses are dialled, except for a redirect from a registry that
		// is not local (redirectGuard marks its context); this machine's other addresses are
		// not refused then, only those local to any machine.
		redirected := *plain
		redirected.Control = func(_, address string, _ syscall.RawConn) error { return refuseLocal(address, nil) }
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			if ctx.Value(remoteRedirectKey{}) != nil && !hostAllowed(proxies, addr) {
				return redirected.DialContext(ctx, network, addr)
			}
			return plain.DialContext(ctx, network, addr)
		}
	}
	own := ownAddresses()
	guarded := *plain
	guarded.Control = func(_, address string, _ syscall.RawConn) error { return refuseLocal(address, own) }
	allowed := append(append(append([]string{}, o.PlainHTTPHosts...), o.LocalHosts...), proxies...)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if hostAllowed(allowed, addr) {
			return plain.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}

// remoteRedirectKey marks the context of a request that a redirect from a registry on an address
// that is not local made (redirectGuard): its dial refuses local addresses.
type remoteRedirectKey struct{}

// redirectGuard is the CLI's rule for redirects (a client without RefuseLocalAddresses): it
// reaches a loopback registry the user names, as docker and oras do, but a registry that is not
// on a local address cannot send it to one. A redirect is followed by the transport with a
// context that makes the dialler refuse loopback, link-local, unspecified and metadata
// addresses, checked on the IP dialled, so a host name that resolves to one is refused too. The
// controller (RefuseLocalAddresses) refuses them on every dial, redirect or not.
type redirectGuard struct{ next http.RoundTripper }

func (g redirectGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Response == nil {
		return g.next.RoundTrip(req)
	}
	origin := req
	for origin.Response != nil && origin.Response.Request != nil {
		origin = origin.Response.Request
	}
	if !localHost(origin.URL.Host) {
		req = req.WithContext(context.WithValue(req.Context(), remoteRedirectKey{}, true))
	}
	return g.next.RoundTrip(req)
}

// localHost tells whether host (host or host:port, as a URL names it) is local to any machine:
// localhost, or a loopback, link-local, unspecified or metadata IP address.
func localHost(host string) bool {
	if isLoopback(host) {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && localKind(ip.WithZone("").Unmap(), nil) != ""
}

// ownAddresses returns the addresses of this machine's interfaces (a pod's own IP among them),
// or none when they cannot be read.
func ownAddresses() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var own []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				own = append(own, ip.Unmap())
			}
		}
	}
	return own
}

// checkRedirect is the http.Client.CheckRedirect of a client with RefuseLocalAddresses: it
// refuses a redirect from HTTPS to plain HTTP, and one to a plain HTTP host the options do not
// list, so that no redirect reaches a plain HTTP port the dial check lets through (a listed
// registry's). It keeps net/http's bound of 10 redirects, which a CheckRedirect replaces.
func (o *Options) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Scheme != "http" {
		return nil
	}
	if prev := via[len(via)-1]; prev.URL.Scheme == "https" {
		return fmt.Errorf("redirect from %s to %s leaves HTTPS for plain HTTP: %w", prev.URL.Host, req.URL.Redacted(), ErrLocalAddress)
	}
	if !slices.Contains(o.PlainHTTPHosts, req.URL.Host) {
		return fmt.Errorf("redirect to %s: plain HTTP to a registry not listed: %w", req.URL.Redacted(), ErrLocalAddress)
	}
	return nil
}

// hostAllowed tells whether addr (host:port, as dialled) is one of hosts (host or host:port).
func hostAllowed(hosts []string, addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	for _, entry := range hosts {
		h, p, err := net.SplitHostPort(entry)
		if err != nil {
			h, p = strings.TrimSuffix(strings.TrimPrefix(entry, "["), "]"), ""
		}
		if strings.EqualFold(h, host) && (p == "" || p == port) {
			return true
		}
	}
	return false
}

// refuseLocal runs in a net.Dialer Control, once the address is resolved and before connecting:
// it refuses loopback, link-local, unspecified and cloud metadata addresses, the addresses in
// own (this machine's), and NAT64 addresses that embed any of these.
func refuseLocal(address string, own []netip.Addr) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial %s: not an IP address", address)
	}
	ip = ip.WithZone("").Unmap()
	if kind := localKind(ip, own); kind != "" {
		return fmt.Errorf("%s is %s: %w", ip, kind, ErrLocalAddress)
	}
	if nat64Prefix.Contains(ip) {
		b := ip.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if kind := localKind(v4, own); kind != "" {
			return fmt.Errorf("%s is NAT64 for %s, %s: %w", ip, v4, kind, ErrLocalAddress)
		}
	}
	return nil
}

// localKind names what makes ip local, or returns "".
func localKind(ip netip.Addr, own []netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "a link-local address"
	case ip.IsUnspecified():
		return "the unspecified address, which reaches this machine"
	case slices.Contains(metadataAddresses, ip):
		return "a cloud metadata address"
	case slices.Contains(own, ip):
		return "an address of this machine"
	}
	return ""
}
