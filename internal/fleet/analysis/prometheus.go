package analysis

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Bounds of one query: the Prometheus is the operator's, but a query is a fleet's, and one that
// returns a sample per series of a large cluster must not cost the controller its memory.
const (
	queryTimeout     = 10 * time.Second
	maxResponseBytes = 1 << 20
	maxSamples       = 10000
)

// Prometheus answers instant queries: the one --analysis-prometheus-address names.
type Prometheus struct {
	api promv1.API
}

// NewPrometheus is a client of the Prometheus HTTP API at address, with the bearer token that
// token gives for each request (nil, or "": none; read per request, so that a mounted token that
// rotates is taken), over transport (nil: http.DefaultTransport). Responses over
// maxResponseBytes are refused.
func NewPrometheus(address string, token func() (string, error), transport http.RoundTripper) (*Prometheus, error) {
	if transport == nil {
		transport = http.DefaultTransport
	}
	// A redirect is not followed: the token is added to every request this client sends, and
	// must go only where the operator said.
	httpClient := &http.Client{Transport: &boundedTransport{next: transport, token: token},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	c, err := promapi.NewClient(promapi.Config{Address: address, Client: httpClient})
	if err != nil {
		return nil, fmt.Errorf("prometheus client for --analysis-prometheus-address: %w", err)
	}
	return &Prometheus{api: promv1.NewAPI(c)}, nil
}

// Sample is one value of a query's result; Labels is nil for a scalar.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant query at now.
func (p *Prometheus) Query(ctx context.Context, promql string, now time.Time) ([]Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	value, _, err := p.api.Query(ctx, promql, now, promv1.WithTimeout(queryTimeout))
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	switch v := value.(type) {
	case *model.Scalar:
		return []Sample{{Value: float64(v.Value)}}, nil
	case model.Vector:
		if len(v) > maxSamples {
			return nil, fmt.Errorf("query returned %d samples, over the limit of %d: aggregate it (sum by (namespace))", len(v), maxSamples)
		}
		out := make([]Sample, 0, len(v))
		for _, s := range v {
			labels := make(map[string]string, len(s.Metric))
			for k, val := range s.Metric {
				labels[string(k)] = string(val)
			}
			out = append(out, Sample{Labels: labels, Value: float64(s.Value)})
		}
		return out, nil
	default:
		return nil, fmt.Errorf("query returned a %s: want an instant vector or a scalar", value.Type())
	}
}

// boundedTransport adds the bearer token and cuts a response body at maxResponseBytes.
type boundedTransport struct {
	next  http.RoundTripper
	token func() (string, error)
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.token != nil {
		token, err := t.token()
		if err != nil {
			return nil, fmt.Errorf("read the Prometheus token (--analysis-prometheus-token-file): %w", err)
		}
		if token != "" {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+token)
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponseBytes}
	return resp, nil
}

var errTooLarge = fmt.Errorf("response over %d bytes", maxResponseBytes)

// limitedBody fails a read past its limit instead of truncating: a cut JSON document would be
// a confusing parse error.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	// One byte past the limit is read to tell a body of exactly the limit from a longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errTooLarge
	}
	return n, err
}
