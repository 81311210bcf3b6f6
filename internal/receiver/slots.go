package receiver

import (
	"net"
	"sync"
)

// addressSlots hands out a bounded number of slots, in all and per remote address: what one
// sender holds leaves the rest to the others.
type addressSlots struct {
	total, perAddress int

	mu    sync.Mutex
	taken int
	held  map[string]int
}

func newAddressSlots(total, perAddress int) *addressSlots {
	return &addressSlots{total: total, perAddress: perAddress, held: map[string]int{}}
}

// take takes a slot for address, and reports whether there was one.
func (s *addressSlots) take(address string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken >= s.total || s.held[address] >= s.perAddress {
		return false
	}
	s.taken++
	s.held[address]++
	return true
}

// give gives back a slot take gave address.
func (s *addressSlots) give(address string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken--
	if s.held[address]--; s.held[address] <= 0 {
		delete(s.held, address)
	}
}

// remoteAddress is the sender a request's remote address (host:port) counts for: its IPv4
// address, or its IPv6 address's /48, which one site is commonly given whole. The connection's
// peer, never a header a sender writes (X-Forwarded-For).
func remoteAddress(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	default:
		return ip.Mask(net.CIDRMask(48, 128)).String()
	}
}
