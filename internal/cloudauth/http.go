package cloudauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// Bounds of one exchange. A token endpoint answers a few KiB (an ECR authorization token, an
// Azure AD or ACR JWT); one that answers more, or slowly, is refused rather than held: the
// exchange runs inside a resource's pull, whose time and memory the registry bounds already
// count (the reconcile's spec.timeout; the registry's byte limits), so it gets bounds of the
// same kind.
const (
	// DefaultTimeout bounds one exchange, every request of it together.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxResponseBytes bounds what each connection to a token endpoint reads (TLS
	// included); connections are not reused, so it bounds each answer.
	DefaultMaxResponseBytes = 256 << 10
	// maxResponseHeaderBytes bounds the headers of each answer.
	maxResponseHeaderBytes = 64 << 10
	dialTimeout            = 10 * time.Second
)

// transportOptions returns what every request of the exchanges goes through, as an option of
// an *http.Transport (the form the AWS SDK's buildable client takes): system roots plus caBundle
// (the controller's --ca-file, so that a private endpoint or a stand-in is trusted as its
// registries are), the environment's proxy (HTTPS_PROXY, NO_PROXY), and the bounds above. The
// cloud SDKs would each use their own client (fluxcd/pkg/auth hands them a 10-second client of
// unbounded size); the Implementations of this package replace it.
func transportOptions(caBundle []byte, timeout time.Duration, maxBytes int64) (func(*http.Transport), error) {
	var pool *x509.CertPool
	if len(caBundle) > 0 {
		var err error
		if pool, err = x509.SystemCertPool(); err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("CA bundle holds no PEM certificate")
		}
	}
	proxy := httpproxy.FromEnvironment().ProxyFunc()
	dialer := &net.Dialer{Timeout: dialTimeout}
	return func(t *http.Transport) {
		if t.TLSClientConfig == nil {
			t.TLSClientConfig = &tls.Config{}
		}
		t.TLSClientConfig.MinVersion = tls.VersionTLS12
		if pool != nil {
			t.TLSClientConfig.RootCAs = pool
		}
		t.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &limitedConn{Conn: c, left: maxBytes, max: maxBytes, addr: addr}, nil
		}
		t.TLSHandshakeTimeout = dialTimeout
		t.ResponseHeaderTimeout = timeout
		t.MaxResponseHeaderBytes = maxResponseHeaderBytes
		t.DisableKeepAlives = true
	}, nil
}

// newHTTPClient is an *http.Client with transportOptions.
func newHTTPClient(opts func(*http.Transport), timeout time.Duration) *http.Client {
	t := &http.Transport{ForceAttemptHTTP2: true}
	opts(t)
	return &http.Client{Transport: t, Timeout: timeout}
}

// limitedConn fails a read past max bytes.
type limitedConn struct {
	net.Conn
	left, max int64
	addr      string
}

func (c *limitedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("the answer of %s is larger than %d bytes: refused", c.addr, c.max)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}
