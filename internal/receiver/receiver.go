package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// MaxBodyBytes bounds a request body: a Distribution envelope of many events fits.
const MaxBodyBytes = 1 << 20

// MaxNotifications bounds the notifications taken from one request (pushes of a tag, repeats
// counted once): the first ones are woken, the others dropped and the answer (still 202, so
// that a registry does not send the same envelope again and again) says how many. A registry
// sends a push or a few per request; a 1 MiB envelope holds some 15,000, each of which, with
// its repository's followers listed, used to cost the controller a share of a minute of CPU.
// The pushes dropped are seen at each follower's interval.
const MaxNotifications = 64

// maxUnverified bounds the signed requests whose bodies are read at once: a signature is
// checked over the whole body, so an unauthenticated sender could otherwise make the receiver
// hold MaxBodyBytes per connection it opens. Requests beyond it are answered 503 (senders retry).
const maxUnverified = 32

// maxUnverifiedPerAddress bounds the slots of maxUnverified one remote address holds (an IPv6
// address by its /48, which one site is commonly given whole), so that a sender who opens many slow
// connections leaves the others to everyone else. Behind a proxy every sender shares its
// address; proxies commonly read a body whole before they forward it, so a slow sender does not
// hold a slot there.
const maxUnverifiedPerAddress = 4

// bodyTimeout is how long a body may take to arrive once its headers have: a notification is a
// few KiB, and even MaxBodyBytes in that time is 200 KiB/s. A slow sender holds its slot that
// long, not for the server's ReadTimeout.
const bodyTimeout = 5 * time.Second

// maxInFlightPerSource bounds the authenticated requests of one source read and woken at once
// (a token's from before its body is read, a signature's from when it verifies): whoever holds a
// source's key makes the controller hold MaxBodyBytes and wake MaxNotifications for this many
// requests at most, and holds up no other source's. A request that finds no slot within
// inFlightWait is answered 503 (senders retry).
const maxInFlightPerSource = 4

// inFlightWait is how long an authenticated request waits for one of its source's slots: a
// burst of a few requests (Harbor sends one per artifact, several at once) is taken in turn
// rather than refused.
const inFlightWait = 2 * time.Second

// PathPrefix is where the sources are served: PathPrefix + "distribution", and so on.
const PathPrefix = "/hooks/"

// waker wakes the resources that follow a repository; it reports whether any does.
type waker interface {
	Wake(ctx context.Context, p Push) bool
}

// keys hands out each source's key; errNoKey when the source has none.
type keys interface {
	Key(ctx context.Context, source Source) ([]byte, error)
}

// Options configure a Receiver.
type Options struct {
	// Keys authenticate the sources (SecretKeys).
	Keys keys
	// Waker is told of the pushes of each repository an authenticated request names, once per
	// repository and request.
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
	// unverified holds a slot per signed request whose body is being read, before it is checked.
	unverified *addressSlots
	// inFlight holds a token per authenticated request of a source being read or woken.
	inFlight map[Source]chan struct{}
}

// New makes a receiver.
func New(opts Options) *Receiver {
	h := &Receiver{opts: opts, unverified: newAddressSlots(maxUnverified, maxUnverifiedPerAddress),
		inFlight: map[Source]chan struct{}{}}
	for _, s := range Sources {
		h.inFlight[s] = make(chan struct{}, maxInFlightPerSource)
	}
	return h
}

// ServeHTTP answers POST /hooks/SOURCE: 202 when authenticated and understood (whether or not
// anyone follows the repositories it names), 401 when not authenticated, 4xx for what is not a
// notification, 503 when the keys cannot be read or too many requests are in flight. Every
// answer is counted.
func (h *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := ctrl.LoggerFrom(r.Context()).WithName("receiver")
	name, _ := strings.CutPrefix(r.URL.Path, PathPrefix)
	source := Source(name)
	if !slices.Contains(Sources, source) || !strings.HasPrefix(r.URL.Path, PathPrefix) {
		h.opts.Metrics.count("unknown", OutcomeInvalid)
		http.NotFound(w, r)
		return
	}
	a := &answer{w: w, r: r, log: log, source: source, metrics: h.opts.Metrics}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		a.reply(http.StatusMethodNotAllowed, OutcomeInvalid, "POST a notification")
		return
	}
	key, err := h.opts.Keys.Key(r.Context(), source)
	if err != nil && !errors.Is(err, errNoKey) {
		log.Error(err, "read webhook keys", "source", source)
		a.reply(http.StatusServiceUnavailable, OutcomeUnavailable, "keys unavailable")
		return
	}
	body, release, ok := h.admit(a, key)
	if !ok {
		return
	}
	defer release()
	h.deliver(a, body)
}

// answer writes the one answer of a request and counts it.
type answer struct {
	w       http.ResponseWriter
	r       *http.Request
	log     logr.Logger
	source  Source
	metrics *Metrics
}

func (a *answer) reply(status int, outcome, text string) {
	a.metrics.count(string(a.source), outcome)
	if status >= http.StatusBadRequest {
		http.Error(a.w, text, status)
		return
	}
	if text != "" {
		a.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	a.w.WriteHeader(status)
	if text != "" {
		if _, err := io.WriteString(a.w, text+"\n"); err != nil {
			// The sender went away; the request was taken all the same.
			a.log.V(1).Info("answer not written", "source", a.source, "error", err.Error())
		}
	}
}

func (a *answer) busy() {
	a.w.Header().Set("Retry-After", "1")
	a.reply(http.StatusServiceUnavailable, OutcomeUnavailable, "too many requests in flight")
}

// unauthenticated refuses the request without telling the sender what failed (no key, which
// header, a mismatch, a stale timestamp).
func (a *answer) unauthenticated() {
	a.log.V(1).Info("unauthenticated notification", "source", a.source, "remote", a.r.RemoteAddr)
	a.w.Header().Set("WWW-Authenticate", `Bearer realm="pkgsync"`)
	a.reply(http.StatusUnauthorized, OutcomeUnauthenticated, "unauthenticated")
}

// admit authenticates the request and reads its body within the slots it may hold: a token,
// and a signature's timestamp, are checked before the body is read; only a signature needs the
// body, and only so many signed bodies are read at once, per remote address and in all. Once
// authenticated, the request holds one of its source's slots. When ok, the caller calls release
// once done; otherwise the request has been answered.
func (h *Receiver) admit(a *answer, key []byte) (body []byte, release func(), ok bool) {
	r := a.r
	signed := isSigned(r)
	if len(key) == 0 || !signed && !authenticate(r, nil, key) {
		a.unauthenticated()
		return nil, nil, false
	}
	var held []func()
	release = func() {
		for _, give := range held {
			give()
		}
	}
	if signed {
		if ts, stamped := timestamp(r); stamped && !fresh(ts, time.Now()) {
			a.unauthenticated()
			return nil, nil, false
		}
		address := remoteAddress(r.RemoteAddr)
		if !h.unverified.take(address) {
			a.busy()
			return nil, nil, false
		}
		held = append(held, func() { h.unverified.give(address) })
	} else {
		if !h.take(r.Context(), a.source) {
			a.busy()
			return nil, nil, false
		}
		held = append(held, func() { h.give(a.source) })
	}
	body, err := readBody(a.w, r)
	if err != nil {
		release()
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			a.reply(http.StatusRequestEntityTooLarge, OutcomeInvalid, "body over 1 MiB")
		case errors.Is(err, os.ErrDeadlineExceeded):
			a.reply(http.StatusRequestTimeout, OutcomeInvalid, fmt.Sprintf("body not sent within %s", bodyTimeout))
		default:
			a.reply(http.StatusBadRequest, OutcomeInvalid, "body not read")
		}
		return nil, nil, false
	}
	if signed {
		if !authenticate(r, body, key) {
			release()
			a.unauthenticated()
			return nil, nil, false
		}
		// Verified: from here it counts as its source's, and keeps its body's slot (the body is
		// still held) while it waits for one.
		if !h.take(r.Context(), a.source) {
			release()
			a.busy()
			return nil, nil, false
		}
		held = append(held, func() { h.give(a.source) })
	}
	return body, release, true
}

// deliver decodes an authenticated request and wakes the followers of what it names: one wake
// per repository, with every tag the request names of it, so that the followers of a
// repository are listed once per request at most, however many pushes name it.
func (h *Receiver) deliver(a *answer, body []byte) {
	notifications, err := decode(a.source, body)
	if err != nil {
		a.reply(http.StatusBadRequest, OutcomeInvalid, err.Error())
		return
	}
	if len(notifications) == 0 {
		a.reply(http.StatusAccepted, OutcomeIgnored, "")
		return
	}
	var truncated string
	if len(notifications) > MaxNotifications {
		truncated = fmt.Sprintf("took the first %d of %d notifications (at most %d per request); the others are seen at each follower's interval",
			MaxNotifications, len(notifications), MaxNotifications)
		a.log.Info("notifications dropped: too many in one request", "source", a.source, "notifications", len(notifications), "taken", MaxNotifications)
		notifications = notifications[:MaxNotifications]
	}
	woke := false
	for _, p := range group(h.bind(a.source, notifications)) {
		followed := h.opts.Waker.Wake(a.r.Context(), p)
		woke = woke || followed
		a.log.V(1).Info("notification", "source", a.source, "repository", p.Key(), "tags", len(p.Tags), "followed", followed)
	}
	if !woke {
		a.reply(http.StatusAccepted, OutcomeUnfollowed, truncated)
		return
	}
	a.reply(http.StatusAccepted, OutcomeWoke, truncated)
}

// take waits up to inFlightWait for one of source's slots, and reports whether it got one.
func (h *Receiver) take(ctx context.Context, source Source) bool {
	slots := h.inFlight[source]
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	wait := time.NewTimer(inFlightWait)
	defer wait.Stop()
	select {
	case slots <- struct{}{}:
		return true
	case <-wait.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (h *Receiver) give(source Source) { <-h.inFlight[source] }

// readBody reads r's body, at most MaxBodyBytes, within bodyTimeout: the connection's read
// deadline is moved to it (the server's ReadTimeout is far longer), and cleared once the body is
// read, so that what follows is not cut short by it (net/http reads on in the background to see
// a client go away, and would cancel the request at the deadline). A handler not served by
// net/http's server (a test's recorder) has no deadline to move.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(bodyTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return nil, err
	}
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, err
	}
	return body, nil
}

// group gathers notifications by repository (Key), in the order they first appear: each
// repository's tags, with the digest a notification named for each (a digest rather than none).
func group(notifications []Notification) []Push {
	var out []Push
	index := map[string]int{}
	for _, n := range notifications {
		i, ok := index[n.Key()]
		if !ok {
			i = len(out)
			index[n.Key()] = i
			out = append(out, Push{Registry: n.Registry, Repository: n.Repository, Tags: map[string]string{}})
		}
		if digest, seen := out[i].Tags[n.Tag]; !seen || digest == "" {
			out[i].Tags[n.Tag] = n.Digest
		}
	}
	return out
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
