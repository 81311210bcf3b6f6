package receiver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SignatureHeader carries the HMAC-SHA256 of the request body under the source's key, in hex:
// "sha256=HEX" (GitHub's form). Senders that can sign use it instead of a bearer token: the
// key then never crosses the network.
const SignatureHeader = "X-Pkgsync-Signature"

// TimestampHeader carries when a signed request was signed, in Unix seconds. With it the MAC
// covers "TIMESTAMP.BODY" (Stripe's and Slack's form) and the request is refused once it is
// further than maxSignatureAge from the receiver's clock, so a signed request seen on the way
// (a proxy's log, plain HTTP) cannot be sent again later. A signature without it is still taken,
// as documented before it existed: replaying one can only wake again, which is idempotent (the
// tag is resolved from the registry, nothing is taken from the payload) and coalesced like any
// burst. No payload can pass for a timestamped message or the other way round: a payload is
// a JSON object, a timestamped message starts with digits.
const TimestampHeader = "X-Pkgsync-Timestamp"

// maxSignatureAge is how far from the receiver's clock a signature's timestamp may be, either
// way: room for clocks that drift and senders that retry, and the whole time a request seen on
// the way can be replayed.
const maxSignatureAge = 5 * time.Minute

// isSigned reports whether r carries a signature (SignatureHeader) rather than a token: its body
// must be read to authenticate it.
func isSigned(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get(SignatureHeader), "sha256=")
}

// timestamp is a request's TimestampHeader, and whether it has one. Several are none that
// fresh accepts.
func timestamp(r *http.Request) (value string, stamped bool) {
	values := r.Header.Values(TimestampHeader)
	if len(values) != 1 {
		return "", len(values) > 0
	}
	return values[0], true
}

// fresh reports whether a timestamp is a time in Unix seconds within maxSignatureAge of now.
func fresh(value string, now time.Time) bool {
	sec, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.Unix(sec, 0))
	return age <= maxSignatureAge && age >= -maxSignatureAge
}

// errNoKey is a source without a key: it is not enabled.
var errNoKey = errors.New("no key for this source")

// authenticate checks a request against the source's key: "Authorization: Bearer KEY", or the
// HMAC in SignatureHeader of the body, or of "TIMESTAMP.BODY" when the request carries
// TimestampHeader (whose age the caller checks). Both compare in constant time; the token is
// compared through its SHA-256 so that its length does not show either.
func authenticate(r *http.Request, body, key []byte) bool {
	if len(key) == 0 {
		return false
	}
	if sig, ok := strings.CutPrefix(r.Header.Get(SignatureHeader), "sha256="); ok {
		got, err := hex.DecodeString(sig)
		if err != nil {
			return false
		}
		mac := hmac.New(sha256.New, key)
		if ts, stamped := timestamp(r); stamped {
			mac.Write([]byte(ts + "."))
		}
		mac.Write(body)
		return hmac.Equal(got, mac.Sum(nil))
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256(key)
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// secretKeysTTL is how long the Secret's keys are kept before it is read again: a rotated key
// is taken within it. Requests, authenticated or not, never read the Secret more often (nor, while it cannot be read, more often than secretRetry).
const secretKeysTTL = 10 * time.Second

// secretRetry is how long a failure to read the Secret is remembered: while it cannot be read,
// requests are answered 503 without each of them asking the API server again.
const secretRetry = time.Second

// SecretKeys reads the key of each source from one Secret: data key distribution, harbor or
// generic. A source without a data key is disabled (its requests are unauthenticated).
type SecretKeys struct {
	// Reader reads the Secret; an uncached reader (the manager's APIReader) keeps the
	// controller's cache free of Secrets.
	Reader client.Reader
	// Secret names the Secret.
	Secret client.ObjectKey

	mu   sync.Mutex
	read time.Time
	data map[string][]byte
	// failed is when the last read failed, with err.
	failed time.Time
	err    error
	now    func() time.Time
}

// Key returns the key of source; errNoKey when the Secret has none (or does not exist), another
// error when the Secret cannot be read.
func (s *SecretKeys) Key(ctx context.Context, source Source) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	if !s.failed.IsZero() && now.Sub(s.failed) < secretRetry {
		return nil, s.err
	}
	if s.read.IsZero() || now.Sub(s.read) >= secretKeysTTL {
		var secret corev1.Secret
		err := s.Reader.Get(ctx, s.Secret, &secret)
		switch {
		case err == nil:
			s.data = secret.Data
		case apierrors.IsNotFound(err):
			s.data = nil
		default:
			// Remembered for secretRetry only, and not when the request itself went away (a
			// sender that hangs up must not refuse the next ones).
			err = fmt.Errorf("read webhook secret %s: %w", s.Secret, err)
			if ctx.Err() == nil {
				s.failed, s.err = now, err
			}
			return nil, err
		}
		s.read, s.failed, s.err = now, time.Time{}, nil
	}
	if key := s.data[string(source)]; len(key) > 0 {
		return key, nil
	}
	return nil, errNoKey
}
