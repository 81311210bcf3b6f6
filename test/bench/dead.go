package main

import (
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/clientcmd"
)

// deadServer is the hosted API server of a dead hosted cluster: a loopback listener that accepts
// TCP connections and never answers, as an API server behind a dead node or a broken tunnel
// does. The connections are held open until the benchmark ends, so the client waits for its own
// timeouts (TLS handshake, request), not for a reset.
type deadServer struct {
	listener net.Listener
	accepted atomic.Int64

	mu   sync.Mutex
	held []net.Conn
}

func startDeadServer() (*deadServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for a dead hosted API server: %w", err)
	}
	d := &deadServer{listener: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			d.accepted.Add(1)
			d.mu.Lock()
			d.held = append(d.held, c) // never answered
			d.mu.Unlock()
		}
	}()
	return d, nil
}

// URL is the server address for a kubeconfig.
func (d *deadServer) URL() string { return "https://" + d.listener.Addr().String() }

// Close stops listening and closes the held connections.
func (d *deadServer) Close() error {
	err := d.listener.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.held {
		_ = c.Close()
	}
	d.held = nil
	return err
}

// rewriteServer returns kubeconfig with every cluster's server set to server: the credentials
// and CA stay those of a real hosted control plane, so only the address makes it dead.
func rewriteServer(kubeconfig []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return clientcmd.Write(*cfg)
}

// deadCount is how many of n hosted clusters are dead at percent: rounded, and at least one
// when percent is above zero.
func deadCount(n int, percent float64) int {
	if percent <= 0 {
		return 0
	}
	return min(n, max(1, int(math.Round(float64(n)*percent/100))))
}

// deadIndices spreads d dead clusters evenly over n, so that they are created (and first
// reconciled) across the wave rather than all at its start or end.
func deadIndices(n, d int) map[int]bool {
	out := make(map[int]bool, d)
	for j := range d {
		out[j*n/d+n/(2*d)] = true
	}
	return out
}
