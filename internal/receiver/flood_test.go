package receiver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startServer serves a receiver on a loopback port and returns its address.
func startServer(t *testing.T, k keys) string {
	t.Helper()
	addr, _ := startReceiver(t, k)
	return addr
}

// startReceiver serves a receiver on a loopback port and returns its address and the receiver,
// whose slots a test watches to know when slow senders hold them.
func startReceiver(t *testing.T, k keys) (string, *Receiver) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	addrs := make(chan net.Addr, 1)
	h := New(Options{Keys: k, Waker: &recordingWaker{}, Metrics: m})
	srv := &Server{Addr: "127.0.0.1:0", Listening: func(a net.Addr) { addrs <- a }, Handler: h}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	select {
	case a := <-addrs:
		return a.String(), h
	case err := <-done:
		require.NoError(t, err)
		return "", h
	}
}

// heldBy is how many unverified bodies address holds, and how many are held in all.
func (s *addressSlots) heldBy(address string) (byAddress, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[address], s.taken
}

// Stalled requests hold their slots for bodyTimeout: a test sees them all in well within it.
const (
	slotsTaken = bodyTimeout / 2
	slotsPoll  = 10 * time.Millisecond
)

// stalledPost sends a request's headers announcing a body of MaxBodyBytes and none of the
// body: a slow sender holding the request open.
func stalledPost(t *testing.T, addr, header string) net.Conn {
	t.Helper()
	return stalledPostFrom(t, loopback, addr, header)
}

// loopback is the address the tests' senders connect from; other senders use other addresses
// of 127.0.0.0/8, which all reach the loopback interface.
var loopback = net.IPv4(127, 0, 0, 1)

// dialFrom connects to addr from the local address from.
func dialFrom(ctx context.Context, from net.IP, addr string) (net.Conn, error) {
	return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
}

// stalledPostFrom is stalledPost from the local address from.
func stalledPostFrom(t *testing.T, from net.IP, addr, header string) net.Conn {
	t.Helper()
	conn, err := dialFrom(t.Context(), from, addr)
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
// at most maxUnverified are read at once, whatever the addresses they come from, and the
// others are answered 503 at once rather than each holding a megabyte.
func TestSignedBodiesInFlightBounded(t *testing.T) {
	t.Parallel()
	addr, h := startReceiver(t, staticKeys{Distribution: "k"})
	header := SignatureHeader + ": sha256=00"
	senders := maxUnverified/maxUnverifiedPerAddress + 1
	for i := range senders {
		for range maxUnverifiedPerAddress {
			stalledPostFrom(t, net.IPv4(127, 0, 1, byte(1+i)), addr, header)
		}
	}
	require.True(t, assert.EventuallyWithT(t, func(c *assert.CollectT) {
		_, all := h.unverified.heldBy("")
		assert.Equal(c, maxUnverified, all)
	}, slotsTaken, slotsPoll, "the stalled requests hold every slot"))
	code, err := postFrom(t.Context(), net.IPv4(127, 0, 2, 1), addr, Distribution, `{"events":[]}`, map[string]string{SignatureHeader: "sha256=00"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code, "refused while %d signed bodies are read", maxUnverified)
}

// postFrom posts body to source with header, from the local address from, over a connection
// of its own, and returns the answer's status.
func postFrom(ctx context.Context, from net.IP, addr string, source Source, body string, header map[string]string) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dialFrom(ctx, from, addr)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+PathPrefix+string(source), strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// signedPostFrom is postFrom with body signed under key.
func signedPostFrom(ctx context.Context, from net.IP, addr string, source Source, key, body string) (int, error) {
	return postFrom(ctx, from, addr, source, body, map[string]string{SignatureHeader: sign(key, body)})
}

// TestSlowSendersDoNotStarveSigned is the attack of issue 41 (4): one sender opens more
// connections than there are slots for signed bodies, each announcing a signed body and
// sending none of it. They used to hold every slot for the server's 30 s read timeout, and a
// signed sender elsewhere was answered 503 all along. Now one remote address holds a few slots
// at most: the signed sender gets through at once, while the slow senders still hold theirs.
func TestSlowSendersDoNotStarveSigned(t *testing.T) {
	t.Parallel()
	addr, h := startReceiver(t, staticKeys{Distribution: "k", Generic: "k"})
	header := SignatureHeader + ": sha256=00"
	for range maxUnverified + 4 {
		stalledPostFrom(t, loopback, addr, header)
	}
	require.True(t, assert.EventuallyWithT(t, func(c *assert.CollectT) {
		byAddress, all := h.unverified.heldBy(loopback.String())
		assert.Equal(c, maxUnverifiedPerAddress, byAddress)
		assert.Equal(c, maxUnverifiedPerAddress, all)
	}, slotsTaken, slotsPoll, "the slow sender holds every slot it may"))

	code, err := signedPostFrom(t.Context(), net.IPv4(127, 0, 0, 2), addr, Generic, "k", `{"repository":"team/app","tag":"v1"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, code, "a signed sender at another address gets through")
	byAddress, _ := h.unverified.heldBy(loopback.String())
	assert.Equal(t, maxUnverifiedPerAddress, byAddress, "while the slow sender holds its slots")
}

// TestBodyDeadline: a body, signed or sent with a token, must arrive within a few seconds of
// its headers; a sender that stalls is answered 408 then, and gives its slot back, rather than
// holding it for the server's 30 s read timeout.
func TestBodyDeadline(t *testing.T) {
	t.Parallel()
	addr := startServer(t, staticKeys{Distribution: "k"})
	for _, header := range []string{SignatureHeader + ": sha256=00", "Authorization: Bearer k"} {
		t.Run(header, func(t *testing.T) {
			t.Parallel()
			code, err := status(stalledPost(t, addr, header), bodyTimeout+5*time.Second)
			require.NoError(t, err, "answered once the body is late")
			assert.Equal(t, http.StatusRequestTimeout, code)
		})
	}
}

// TestAuthenticatedInFlightBounded: requests with a source's token are authenticated before
// their bodies are read, and were read and worked on without any bound: a key holder could
// make the controller hold a megabyte per connection and work on all of them at once. Now a
// few per source are taken at once, the others answered 503 (senders retry), and another
// source's requests are not held up by them.
func TestAuthenticatedInFlightBounded(t *testing.T) {
	t.Parallel()
	addr, h := startReceiver(t, staticKeys{Distribution: "k", Generic: "g"})
	for range maxInFlightPerSource {
		stalledPost(t, addr, "Authorization: Bearer k")
	}
	require.True(t, assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, h.inFlight[Distribution], maxInFlightPerSource)
	}, slotsTaken, slotsPoll, "the stalled requests hold every slot of their source"))
	code, err := postFrom(t.Context(), loopback, addr, Distribution, `{"events":[]}`, map[string]string{"Authorization": "Bearer k"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code, "a key holder's requests beyond the bound are refused, after inFlightWait")
	code, err = signedPostFrom(t.Context(), loopback, addr, Generic, "g", `{"repository":"team/app","tag":"v1"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, code, "another source is not held up")
}
