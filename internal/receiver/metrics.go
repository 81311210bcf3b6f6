package receiver

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a request, the values of pkgsync_webhook_requests_total's outcome label.
const (
	// OutcomeWoke: authenticated, and at least one resource follows a repository it names.
	OutcomeWoke = "woke"
	// OutcomeUnfollowed: authenticated pushes of repositories nobody follows; nothing is asked
	// of any registry.
	OutcomeUnfollowed = "unfollowed"
	// OutcomeIgnored: authenticated, but no push of a tag (pulls, blob uploads, pushes by digest).
	OutcomeIgnored = "ignored"
	// OutcomeUnauthenticated: no key for the source, or a token or signature that does not
	// match it (401).
	OutcomeUnauthenticated = "unauthenticated"
	// OutcomeInvalid: not a POST to a known source, a body over the bound or not sent in time,
	// or a payload that is not the source's (4xx).
	OutcomeInvalid = "invalid"
	// OutcomeUnavailable: the key could not be read, or too many requests were in flight (503;
	// senders retry).
	OutcomeUnavailable = "unavailable"
)

// Metrics counts the receiver's requests.
type Metrics struct {
	requests *prometheus.CounterVec
}

// NewMetrics makes the receiver's metrics and registers them with reg (when not nil); a
// collector already registered there is reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pkgsync_webhook_requests_total",
		Help: "Registry notifications received, by source (distribution, harbor, generic, unknown) and outcome (woke, unfollowed, ignored, unauthenticated, invalid, unavailable).",
	}, []string{"source", "outcome"})
	if reg != nil {
		if err := reg.Register(requests); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
			existing, ok := already.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, err
			}
			requests = existing
		}
	}
	return &Metrics{requests: requests}, nil
}

func (m *Metrics) count(source, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(source, outcome).Inc()
	}
}
