package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
)

// Bounds of one endpoint's requests.
const (
	requestTimeout  = 10 * time.Second
	maxResponseRead = 64 << 10
	attempts        = 3
	// sendRate and sendBurst keep a burst of events (a fleet of many partitions halting, a
	// restart) within what chat services take: Slack's incoming webhooks allow one message a
	// second.
	sendRate  = rate.Limit(1)
	sendBurst = 5
)

// SignatureHeader carries the HMAC-SHA256 of a generic request's body under the endpoint's
// hmacKey, in hex: "sha256=HEX", the form of Flux's generic-hmac provider.
const SignatureHeader = "X-Signature"

// sender posts one endpoint's notifications, one at a time, at most sendRate a second.
type sender struct {
	Endpoint
	client  *http.Client
	limiter *rate.Limiter
	queue   chan Notification
	cancel  context.CancelFunc
	done    chan struct{}
	// backoff is the wait before the retry of attempt i (1-based); tests shorten it.
	backoff func(i int) time.Duration
}

func newSender(e Endpoint) (*sender, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.CAPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(e.CAPEM)) {
			return nil, errors.New("caPEM holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: requestTimeout,
		MaxIdleConns:          1,
		IdleConnTimeout:       time.Minute,
		ForceAttemptHTTP2:     true,
	}
	return &sender{
		Endpoint: e,
		client: &http.Client{Transport: transport, Timeout: requestTimeout,
			// A redirect is not followed: the signature and the body were meant for the address
			// the operator wrote.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		limiter: rate.NewLimiter(sendRate, sendBurst),
		queue:   make(chan Notification, queueLength),
		backoff: func(i int) time.Duration { return time.Duration(i) * time.Second },
	}, nil
}

func (s *sender) start(ctx context.Context, log logr.Logger) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		for {
			select {
			case <-ctx.Done():
				return
			case note := <-s.queue:
				if err := s.limiter.Wait(ctx); err != nil {
					return
				}
				if err := s.send(ctx, note); err != nil {
					notifications.WithLabelValues(s.Name, "failed").Inc()
					log.Error(err, "notification failed", "reason", note.Reason, "object", note.Object.Name)
					continue
				}
				notifications.WithLabelValues(s.Name, "sent").Inc()
			}
		}
	}()
}

func (s *sender) stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}

// send posts note, retrying a network error, a 429 or a 5xx answer.
func (s *sender) send(ctx context.Context, note Notification) error {
	body, err := note.body(s.Type)
	if err != nil {
		return wrapNotSent(s.Name, fmt.Errorf("encode: %w", err))
	}
	var last error
	for i := 1; i <= attempts; i++ {
		retry, err := s.post(ctx, body)
		if err == nil {
			return nil
		}
		last = err
		if !retry || i == attempts {
			break
		}
		select {
		case <-ctx.Done():
			return wrapNotSent(s.Name, ctx.Err())
		case <-time.After(s.backoff(i)):
		}
	}
	return wrapNotSent(s.Name, fmt.Errorf("after %d attempt(s): %w", attempts, last))
}

// post sends body once and says whether a failure is worth a retry.
func (s *sender) post(ctx context.Context, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Address, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("the address is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "pkgsync")
	if s.HMACKey != "" {
		mac := hmac.New(sha256.New, []byte(s.HMACKey))
		mac.Write(body)
		req.Header.Set(SignatureHeader, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return true, withoutAddress(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("the endpoint answered %s", resp.Status)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return false, fmt.Errorf("the endpoint answered %s, a redirect, which is not followed: give the final address", resp.Status)
	default:
		return false, fmt.Errorf("the endpoint answered %s: check the address and, for a generic endpoint, hmacKey", resp.Status)
	}
}

// withoutAddress drops the URL from a client error: a Slack address is a credential, and logs
// are read by more people than the Secret.
func withoutAddress(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("POST: %w", ue.Err)
	}
	return err
}
