package hosted

import (
	"crypto/tls"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http2"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// withShortHandshake returns a copy of cfg with a transport of its own whose TCP connect and
// TLS handshake are each bounded by timeout, and whose connections close after idle without a
// request; it speaks HTTP/1.1 until configureHTTP2 adds HTTP/2. client-go's transport waits up to 10 s for a
// handshake, and a hosted API server behind a dead tunnel accepts the connection and never
// answers: that wait, not the dial, is what a dead cluster costs a reconcile. rest.Config has no
// field for it, so the transport is built here from the config's own TLS settings, the way
// client-go builds it; authentication headers are still added by client-go. Exec plugins and
// auth providers (allowed only by opt-in) may supply client certificates at run time, which a
// transport of one's own cannot take: those keep client-go's transport, with the dial bounded.
// tlsConfig is rest.TLSConfigFor(cfg).
func withShortHandshake(cfg *rest.Config, timeout, idle time.Duration, tlsConfig *tls.Config) *rest.Config {
	dial := (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		out := rest.CopyConfig(cfg)
		out.Dial = dial
		return out
	}
	out := rest.CopyConfig(cfg)
	out.TLSClientConfig = rest.TLSClientConfig{}
	t := utilnet.SetOldTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: timeout,
		TLSClientConfig:     tlsConfig,
		// One HTTP/2 connection carries every request; over HTTP/1.1 a few idle connections per
		// hosted API server are enough, and each one kept costs buffers times a thousand clusters.
		MaxIdleConnsPerHost: 4,
		// Also the HTTP/2 connection's (x/net/http2 takes it from here).
		IdleConnTimeout: idle,
		DialContext:     dial,
	})
	out.Transport = t
	return out
}

// configureHTTP2 configures HTTP/2 on t, a transport of withShortHandshake's, as client-go's utilnet.SetTransportDefaults does
// (DISABLE_HTTP2 honoured), with the connection health check bounded by timeout instead of its
// 30 s without a frame and 15 s for the ping's answer: a hosted API server behind a dead tunnel
// is found within two timeouts. The shorter wait also bounds what a closed connection costs:
// x/net/http2 resets the health check's timer as its read loop ends instead of stopping it, so
// a closed connection, its buffers, header tables and TLS state stay reachable from the timer
// until it fires (golang/go#80920, still so in x/net v0.63); with a thousand hosted clusters
// each closing a connection after every pass, that was some 15 MB of a 100 MB heap.
func configureHTTP2(t *http.Transport, timeout time.Duration) {
	if os.Getenv("DISABLE_HTTP2") != "" {
		return
	}
	if t.TLSClientConfig != nil && len(t.TLSClientConfig.NextProtos) > 0 && !slices.Contains(t.TLSClientConfig.NextProtos, http2.NextProtoTLS) {
		return // the kubeconfig asked for HTTP/1.1
	}
	t2, err := http2.ConfigureTransports(t)
	if err != nil {
		return // HTTP/1.1 then, as client-go does; only a transport configured twice fails
	}
	t2.ReadIdleTimeout = timeout
	t2.PingTimeout = timeout
}

// noRedirects makes a redirect an answer, not followed: an API server does not redirect API
// requests, and following one would send the controller's requests (and, to the same host, its
// credentials) to a server checkServer would refuse.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// opaqueBodies replaces the body of every response that is not a Kubernetes API object with a
// fixed text naming its status code. client-go copies the body of an unexpected response (an
// HTML error page, a text answer) into its error, the error becomes a condition message and an
// event, and whoever wrote the connector Secret reads them: with a server that is not a hosted
// API server (--insecure-kubeconfig-any-server, or a Service answering in its place), that
// would let them read what in-cluster services answer through the controller. Kubernetes API
// responses (JSON, protobuf, YAML), Status errors included, pass unchanged.
type opaqueBodies struct{ next http.RoundTripper }

func (t opaqueBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json", "application/vnd.kubernetes.protobuf", "application/yaml",
		"application/apply-patch+yaml":
		return resp, nil
	}
	// Drain a little so that the connection may be reused, then drop the body.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
	text := fmt.Sprintf("HTTP %d from the hosted API server with a body that is not a Kubernetes API object; the body is not shown", resp.StatusCode)
	resp.Body = io.NopCloser(strings.NewReader(text))
	resp.ContentLength = int64(len(text))
	resp.Header = resp.Header.Clone()
	resp.Header.Set("Content-Type", "text/plain")
	resp.Header.Del("Content-Encoding")
	return resp, nil
}
