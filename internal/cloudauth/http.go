package cloudauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
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
	// DefaultMaxResponseBytes bounds the body of each answer of a token endpoint.
	DefaultMaxResponseBytes = 256 << 10
	// maxResponseHeaderBytes bounds the headers of each answer.
	maxResponseHeaderBytes = 64 << 10
	dialTimeout            = 10 * time.Second
)

// newHTTPClient returns the client every request of the exchanges goes through: system roots
// plus caBundle (the controller's --ca-file, so that a private endpoint or a stand-in is
// trusted the way its registries are), the environment's proxy (HTTPS_PROXY, NO_PROXY), and
// the bounds above. The cloud SDKs would each build their own (fluxcd/pkg/auth hands them a
// 10-second client of unbounded size); the Implementations of this package replace it.
func newHTTPClient(caBundle []byte, timeout time.Duration, maxBytes int64) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("CA bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	proxy := httpproxy.FromEnvironment().ProxyFunc()
	t := &http.Transport{
		Proxy:                  func(r *http.Request) (*url.URL, error) { return proxy(r.URL) },
		DialContext:            (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:        cfg,
		TLSHandshakeTimeout:    dialTimeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		MaxIdleConns:           16,
		IdleConnTimeout:        90 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{Transport: limitedTransport{next: t, max: maxBytes}, Timeout: timeout}, nil
}

// limitedTransport fails the read of a body past max bytes.
type limitedTransport struct {
	next http.RoundTripper
	max  int64
}

func (l limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: l.max, max: l.max, host: req.URL.Host}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	left, max int64
	host      string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly max bytes from a longer one.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("the answer of %s is larger than %d bytes: refused", b.host, b.max)
		}
		return b.ReadCloser.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
