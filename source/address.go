package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrLocalAddress: the registry, a redirect or a token realm is on a loopback, link-local or
// unspecified address, which Options.RefuseLocalAddresses refuses unless the host is listed.
var ErrLocalAddress = errors.New("registries on loopback, link-local or unspecified addresses are not allowed")

// dialer returns the DialContext of the transport NewClient builds: net/http's default dialer,
// refusing local addresses (checked on the IP each attempt connects to) for hosts the options do
// not allow, when they say so.
func (o *Options) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	// net/http's DefaultTransport dialer.
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !o.RefuseLocalAddresses {
		return plain.DialContext
	}
	guarded := *plain
	guarded.Control = refuseLocal
	allowed := append(append([]string{}, o.PlainHTTPHosts...), o.LocalHosts...)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if hostAllowed(allowed, addr) {
			return plain.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
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

// refuseLocal is a net.Dialer Control: it runs once the address is resolved, before connecting,
// and refuses loopback, link-local and unspecified addresses.
func refuseLocal(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial %s: not an IP address", address)
	}
	ip = ip.Unmap()
	var kind string
	switch {
	case ip.IsLoopback():
		kind = "a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		kind = "a link-local address"
	case ip.IsUnspecified():
		kind = "the unspecified address, which reaches this machine"
	default:
		return nil
	}
	return fmt.Errorf("%s is %s: %w", ip.WithZone(""), kind, ErrLocalAddress)
}
