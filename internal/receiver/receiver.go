package receiver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
)

// MaxBodyBytes bounds a request body: a Distribution envelope of many events fits.
const MaxBodyBytes = 1 << 20

// maxInFlight bounds the signed requests whose bodies are read at once: a signature is checked
// over the whole body, so an unauthenticated sender could otherwise make the receiver hold
// MaxBodyBytes per connection it opens. Requests beyond it are answered 503 (senders retry).
const maxInFlight = 32

// PathPrefix is where the sources are served: PathPrefix + "distribution", and so on.
const PathPrefix = "/hooks/"

// waker wakes the resources that follow a repository; it reports whether any does.
type waker interface {
	Wake(ctx context.Context, n Notification) bool
}

// keys hands out each source's key; errNoKey when the source has none.
type keys interface {
	Key(ctx context.Context, source Source) ([]byte, error)
}

// Options configure a Receiver.
type Options struct {
	// Keys authenticate the sources (SecretKeys).
	Keys keys
	// Waker is told of each notification of an authenticated request.
	Waker waker
	// Metrics counts requests; nil counts nothing.
	Metrics *Metrics
	// Registries binds a source's key to the registries it is for (host[:port], as images name
	// them): a notification of that source wakes followers in those registries only, and a
	// generic payload naming another registry wakes nobody. A source without an entry wakes
	// the repository's followers in every registry.
	Registries map[Source][]string
}

// Receiver is the http.Handler of registry notifications.
type Receiver struct {
	opts Options
	// inFlight holds a token per signed request whose body is being read.
	inFlight chan struct{}
}

// New makes a receiver.
func New(opts Options) *Receiver {
	return &Receiver{opts: opts, inFlight: make(chan struct{}, maxInFlight)}
}

// ServeHTTP answers POST /hooks/SOURCE: 202 when authenticated and understood (whether or not
// anyone follows the repositories it names), 401 when not authenticated, 4xx for what is not a
// notification, 503 when the keys cannot be read. Every answer is counted.
func (h *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := ctrl.LoggerFrom(r.Context()).WithName("receiver")
	name, _ := strings.CutPrefix(r.URL.Path, PathPrefix)
	source, known := Source(name), false
	for _, s := range Sources {
		known = known || s == source
	}
	if !known || !strings.HasPrefix(r.URL.Path, PathPrefix) {
		h.opts.Metrics.count("unknown", OutcomeInvalid)
		http.NotFound(w, r)
		return
	}
	reply := func(status int, outcome, text string) {
		h.opts.Metrics.count(string(source), outcome)
		if status >= http.StatusBadRequest {
			http.Error(w, text, status)
			return
		}
		w.WriteHeader(status)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(http.StatusMethodNotAllowed, OutcomeInvalid, "POST a notification")
		return
	}
	key, err := h.opts.Keys.Key(r.Context(), source)
	if err != nil && !errors.Is(err, errNoKey) {
		log.Error(err, "read webhook keys", "source", source)
		reply(http.StatusServiceUnavailable, OutcomeUnavailable, "keys unavailable")
		return
	}
	unauthenticated := func() {
		// What failed (no key, which header, a mismatch) is not told to the sender.
		log.V(1).Info("unauthenticated notification", "source", source, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="pkgsync"`)
		reply(http.StatusUnauthorized, OutcomeUnauthenticated, "unauthenticated")
	}
	// A token is checked before the body is read; only a signature needs the body, and only
	// maxInFlight signed bodies are read at once.
	signed := isSigned(r)
	if len(key) == 0 || !signed && !authenticate(r, nil, key) {
		unauthenticated()
		return
	}
	if signed {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			w.Header().Set("Retry-After", "1")
			reply(http.StatusServiceUnavailable, OutcomeUnavailable, "too many requests in flight")
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			reply(http.StatusRequestEntityTooLarge, OutcomeInvalid, "body over 1 MiB")
			return
		}
		reply(http.StatusBadRequest, OutcomeInvalid, "body not read")
		return
	}
	if signed && !authenticate(r, body, key) {
		unauthenticated()
		return
	}
	notifications, err := decode(source, body)
	if err != nil {
		reply(http.StatusBadRequest, OutcomeInvalid, err.Error())
		return
	}
	if len(notifications) == 0 {
		reply(http.StatusAccepted, OutcomeIgnored, "")
		return
	}
	woke := false
	for _, n := range h.bind(source, notifications) {
		followed := h.opts.Waker.Wake(r.Context(), n)
		woke = woke || followed
		log.V(1).Info("notification", "source", source, "repository", n.Key(), "tag", n.Tag, "followed", followed)
	}
	if !woke {
		reply(http.StatusAccepted, OutcomeUnfollowed, "")
		return
	}
	reply(http.StatusAccepted, OutcomeWoke, "")
}

// bind keeps what a notification of source may wake within the registries its key is bound to
// (Options.Registries): a notification naming only a path names it in each of them, one naming
// another registry is dropped. A source without a binding names the path in every registry.
func (h *Receiver) bind(source Source, notifications []Notification) []Notification {
	hosts, bound := h.opts.Registries[source]
	if !bound {
		return notifications
	}
	var out []Notification
	for _, n := range notifications {
		if n.Registry != "" {
			if slices.ContainsFunc(hosts, func(host string) bool { return strings.EqualFold(host, n.Registry) }) {
				out = append(out, n)
			}
			continue
		}
		for _, host := range hosts {
			m := n
			m.Registry = host
			out = append(out, m)
		}
	}
	return out
}
