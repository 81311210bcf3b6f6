package notify

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// ConfigKey is the Secret's data key holding the endpoints, as YAML.
const ConfigKey = "notifications.yaml"

// Bounds of a configuration: it is the operator's, but it is read on every refresh, and a
// mistaken one must not cost the controller more than a small, fixed amount.
const (
	maxConfigBytes = 64 << 10
	maxEndpoints   = 16
)

// EndpointType is the wire format of an endpoint.
type EndpointType string

const (
	// Generic posts Flux's event JSON (github.com/fluxcd/pkg/apis/event/v1beta1 Event), so a
	// receiver written for Flux's generic and generic-hmac providers takes it unchanged.
	Generic EndpointType = "generic"
	// Slack posts a Slack incoming-webhook message ({"text": ...}), which Mattermost, Rocket.Chat
	// and Microsoft Teams' Slack-compatible connectors take too.
	Slack EndpointType = "slack"
)

// DefaultReasons are the events an endpoint receives unless it lists its own: a rollout halted,
// rolling back or rolled back, waiting for an approval, failed preflight, members or analysis
// checks, and finished (Ready turned True).
var DefaultReasons = []string{
	v1alpha1.RolloutHaltedReason, v1alpha1.RollingBackReason, v1alpha1.RolledBackReason,
	v1alpha1.AwaitingApprovalReason, v1alpha1.PreflightFailedReason, v1alpha1.MembersFailedReason,
	v1alpha1.AnalysisFailedReason, v1alpha1.ReconciliationSucceededReason,
}

// DefaultKinds are the kinds whose events an endpoint receives unless it lists its own.
var DefaultKinds = []string{"HostedClusterPackage"}

// Endpoint is one destination of notifications.
type Endpoint struct {
	// Name identifies the endpoint in logs and metrics; the address never appears there (a
	// Slack webhook's address is its credential).
	Name string `json:"name"`
	// Type is generic or slack.
	Type EndpointType `json:"type"`
	// Address is the https URL posted to.
	Address string `json:"address"`
	// HMACKey, when set, signs each generic request: header X-Signature: sha256=HEX, the
	// HMAC-SHA256 of the body (Flux's generic-hmac form).
	HMACKey string `json:"hmacKey,omitempty"`
	// CAPEM is a PEM bundle trusted for the endpoint instead of the system's roots.
	CAPEM string `json:"caPEM,omitempty"`
	// Reasons are the event reasons sent (DefaultReasons when empty).
	Reasons []string `json:"reasons,omitempty"`
	// Kinds are the kinds whose events are sent (DefaultKinds when empty).
	Kinds []string `json:"kinds,omitempty"`
}

// Config is the content of the Secret's ConfigKey.
type Config struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// ParseConfig reads and checks a configuration: every problem is reported, each naming the
// endpoint and field.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d", ConfigKey, len(data), maxConfigBytes)
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigKey, err)
	}
	if len(cfg.Endpoints) > maxEndpoints {
		return nil, fmt.Errorf("%s: %d endpoints, over the limit of %d", ConfigKey, len(cfg.Endpoints), maxEndpoints)
	}
	var errs []error
	seen := map[string]bool{}
	for i := range cfg.Endpoints {
		e := &cfg.Endpoints[i]
		where := fmt.Sprintf("%s: endpoints[%d] (%s)", ConfigKey, i, e.Name)
		if e.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is required", where))
		} else if seen[e.Name] {
			errs = append(errs, fmt.Errorf("%s: name is used twice; names identify endpoints in logs and metrics", where))
		}
		seen[e.Name] = true
		if e.Type != Generic && e.Type != Slack {
			errs = append(errs, fmt.Errorf("%s: type %q: want generic or slack", where, e.Type))
		}
		if err := checkAddress(e.Address); err != nil {
			errs = append(errs, fmt.Errorf("%s: address: %w", where, err))
		}
		if e.HMACKey != "" && e.Type != Generic {
			errs = append(errs, fmt.Errorf("%s: hmacKey signs generic requests only; Slack's address is its credential", where))
		}
		if e.CAPEM != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(e.CAPEM)) {
			errs = append(errs, fmt.Errorf("%s: caPEM holds no PEM certificate", where))
		}
		if len(e.Reasons) == 0 {
			e.Reasons = DefaultReasons
		}
		if len(e.Kinds) == 0 {
			e.Kinds = DefaultKinds
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// checkAddress takes only https: a notification names resources and revisions, and its
// signature or address is a credential. The address itself is never quoted back, since a
// Slack address is a secret.
func checkAddress(address string) error {
	if address == "" {
		return errors.New("required")
	}
	u, err := url.Parse(address)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "https" || u.Host == "" {
		return errors.New("want an https:// URL with a host (plain http is refused: the request carries a signature or its address is a credential)")
	}
	if u.User != nil {
		return errors.New("credentials in the URL are refused: give hmacKey instead")
	}
	return nil
}

// wants reports whether the endpoint takes an event of this kind and reason.
func (e *Endpoint) wants(kind, reason string) bool {
	return slices.Contains(e.Kinds, kind) && slices.ContainsFunc(e.Reasons, func(r string) bool { return strings.EqualFold(r, reason) })
}
