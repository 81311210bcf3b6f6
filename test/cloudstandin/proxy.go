package cloudstandin

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Proxy is an HTTP CONNECT proxy that reaches the hosts it was given (as host:port, to a
// loopback address) and refuses every other: nothing a test sends through it leaves the machine.
type Proxy struct {
	*httptest.Server
	mu     sync.Mutex
	routes map[string]string
}

// NewProxy starts a proxy; Route adds hosts.
func NewProxy() *Proxy {
	p := &Proxy{routes: map[string]string{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// Route sends CONNECT requests for host (host:port) to addr.
func (p *Proxy) Route(host, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[strings.ToLower(host)] = addr
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "this proxy only tunnels (CONNECT)", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	addr, ok := p.routes[strings.ToLower(r.Host)]
	p.mu.Unlock()
	if !ok {
		http.Error(w, "no stand-in for "+r.Host, http.StatusForbidden)
		return
	}
	upstream, err := net.Dial("tcp", addr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = upstream.Close()
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	conn, buf, err := hj.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	go func() {
		defer upstream.Close()
		defer conn.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(upstream, buf); done <- struct{}{} }()
		go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
		<-done
	}()
}
