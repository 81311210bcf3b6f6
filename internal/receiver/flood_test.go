package receiver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startServer serves a receiver on a loopback port and returns its address.
func startServer(t *testing.T, k keys) string {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	addrs := make(chan net.Addr, 1)
	srv := &Server{Addr: "127.0.0.1:0", Listening: func(a net.Addr) { addrs <- a },
		Handler: New(Options{Keys: k, Waker: &recordingWaker{}, Metrics: m})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	select {
	case a := <-addrs:
		return a.String()
	case err := <-done:
		require.NoError(t, err)
		return ""
	}
}

// stalledPost sends a request's headers announcing a body of MaxBodyBytes and none of the
// body: a slow sender holding the request open.
func stalledPost(t *testing.T, addr, header string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /hooks/distribution HTTP/1.1\r\nHost: pkgsync\r\nContent-Type: application/json\r\n%s\r\nContent-Length: %d\r\n\r\n{",
		header, MaxBodyBytes)
	require.NoError(t, err)
	return conn
}

// status reads the answer to a request on conn, within wait.
func status(conn net.Conn, wait time.Duration) (int, error) {
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// TestUnauthenticatedRefusedBeforeBody: a request without credentials, or with a wrong token,
// is refused without its body being waited for or held: an attacker who cannot authenticate
// cannot make the receiver hold a megabyte per connection.
func TestUnauthenticatedRefusedBeforeBody(t *testing.T) {
	t.Parallel()
	addr := startServer(t, staticKeys{Distribution: "k"})
	for _, header := range []string{"X-Nothing: 1", "Authorization: Bearer wrong"} {
		code, err := status(stalledPost(t, addr, header), 5*time.Second)
		require.NoError(t, err, header+": answered before the body is sent")
		assert.Equal(t, http.StatusUnauthorized, code, header)
	}
}

// TestSignedBodiesInFlightBounded: requests that carry a signature must be read to be checked;
// at most maxInFlight are read at once, and the others are answered 503 at once rather than
// each holding a megabyte.
func TestSignedBodiesInFlightBounded(t *testing.T) {
	t.Parallel()
	addr := startServer(t, staticKeys{Distribution: "k"})
	header := SignatureHeader + ": sha256=00"
	for range maxInFlight + 4 {
		stalledPost(t, addr, header)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn := stalledPost(t, addr, header)
		code, err := status(conn, time.Second)
		_ = conn.Close()
		if err == nil {
			assert.Equal(t, http.StatusServiceUnavailable, code)
			return
		}
		require.True(t, time.Now().Before(deadline), "no request refused while %d signed bodies are read: %v", maxInFlight+4, err)
	}
}
