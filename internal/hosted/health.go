package hosted

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
)

// Health is where a hosted cluster stands for the controller: a circuit breaker per
// hosted-control-plane namespace. Closed, its Packages reach the hosted API server as usual.
// Open (after a connection failure or a timeout), they do not touch the network at all: the
// prober alone checks the server, once per backoff step, off the reconcile workers. A probe that
// gets an answer closes the circuit and wakes the waiting resources at once. A dead hosted
// cluster so costs the fleet one cheap probe per step, not one timeout per reconcile.
type Health string

const (
	// HealthClosed: requests go through.
	HealthClosed Health = "Closed"
	// HealthOpen: requests fail fast until a probe succeeds.
	HealthOpen Health = "Open"
	// HealthProbing: a probe is in flight (half-open); requests still fail fast.
	HealthProbing Health = "Probing"
)

// UnavailableError says a hosted cluster's circuit is open: nothing was sent to it.
//
// Its message stays the same for as long as the circuit is open, so that the retries of a dead
// cluster's resources, one per probe step, write no status: it names the failure that opened
// the circuit and when, not the next probe time (NextProbe, which the caller requeues at, and
// the pkgsync_hosted_next_probe_timestamp_seconds metric carry that).
type UnavailableError struct {
	Namespace string
	// Err is the failure that opened the circuit.
	Err error
	// Since is when the circuit opened.
	Since time.Time
	// NextProbe is when the prober tries the API server again; while a probe is in flight, when
	// that probe ends at the latest.
	NextProbe time.Time
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("hosted API server of %s has not answered since %s: %v; nothing is sent to it until a probe gets an answer, then its resources are reconciled at once",
		e.Namespace, e.Since.UTC().Format(time.RFC3339), e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// health is the circuit of one entry; Clients.mu guards it.
type health struct {
	state    Health
	failures int
	// openErr and openedAt are the failure that opened the circuit and when: what status
	// reports, unchanged by later failed probes.
	openErr   error
	openedAt  time.Time
	lastErr   error
	nextProbe time.Time
}

// backoff is the wait after the n-th consecutive failure: exponential from ProbeInterval,
// capped at MaxProbeInterval, with up to 20 % jitter so that clusters that failed together are
// not probed together.
func (c *Clients) backoff(n int) time.Duration {
	d := c.opts.ProbeInterval
	for i := 1; i < n && d < c.opts.MaxProbeInterval; i++ {
		d *= 2
	}
	d = min(d, c.opts.MaxProbeInterval)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// open records a failure of the hosted API server of an entry. Caller holds c.mu.
func (c *Clients) open(e *entry, err error) {
	now := c.now()
	if e.health.openErr == nil {
		e.health.openErr, e.health.openedAt = err, now
	}
	e.health.failures++
	e.health.lastErr = err
	e.health.state = HealthOpen
	e.health.nextProbe = now.Add(c.backoff(e.health.failures))
}

// unavailable is the error of a namespace whose circuit is open. Caller holds c.mu.
func unavailable(namespace string, e *entry) error {
	return &apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Target: e.target.Name,
		Err: &UnavailableError{Namespace: namespace, Err: e.health.openErr, Since: e.health.openedAt, NextProbe: e.health.nextProbe}}
}

// uncontacted is the error of a namespace whose first contact is still in flight. Caller holds
// c.mu.
func (c *Clients) uncontacted(namespace string, e *entry) error {
	return &apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Target: e.target.Name,
		Err: &UnavailableError{Namespace: namespace, Err: fmt.Errorf("no answer to the first contact within %s", c.opts.FirstContactWait),
			Since: e.health.openedAt, NextProbe: e.health.nextProbe}}
}

// OnRecovered registers a function called with the namespace whose hosted API server answers
// again after its circuit was open; the controller wakes that namespace's resources with it.
func (c *Clients) OnRecovered(fn func(namespace string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recovered = append(c.recovered, fn)
}

// Observe sets the functions called after every request to a hosted API server and after every
// probe (for metrics). Call it before Start and before the first Target.
func (c *Clients) Observe(onRequest func(took time.Duration), onProbe func(namespace string, took time.Duration, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.OnRequest, c.opts.OnProbe = onRequest, onProbe
}

// States counts the cached hosted clusters per health state, for metrics.
func (c *Clients) States() map[Health]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[Health]int{HealthClosed: 0, HealthOpen: 0, HealthProbing: 0}
	for _, e := range c.entries {
		out[e.health.state]++
	}
	return out
}

// NextProbes returns, per namespace whose circuit is open, when its hosted API server is probed
// next (for metrics: status does not carry it, so that a retry writes nothing).
func (c *Clients) NextProbes() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]time.Time{}
	for ns, e := range c.entries {
		if e.health.state != HealthClosed {
			out[ns] = e.health.nextProbe
		}
	}
	return out
}

// Start runs the prober until ctx ends. It implements controller-runtime's manager.Runnable.
func (c *Clients) Start(ctx context.Context) error {
	tick := time.NewTicker(c.opts.ProbeInterval / 4)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, probeConcurrency)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, p := range c.dueProbes() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c.probe(ctx, p)
			}()
		}
	}
}

// probeConcurrency bounds the probes in flight: each costs at most ProbeTimeout.
const probeConcurrency = 16

// dueProbe is one probe to send.
type dueProbe struct {
	namespace string
	e         *entry
}

// dueProbes marks the open circuits whose next probe is due as probing and returns them. Clients
// unused for IdleTTL go first: an open circuit whose resources are gone is not probed forever.
func (c *Clients) dueProbes() []dueProbe {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.evictIdle(now)
	var out []dueProbe
	for ns, e := range c.entries {
		if e.health.state == HealthOpen && !now.Before(e.health.nextProbe) {
			e.health.state = HealthProbing
			// Resources retried now would find the probe still in flight: they are retried
			// once it has ended at the latest (an answer wakes them at once).
			e.health.nextProbe = now.Add(c.opts.ProbeTimeout)
			out = append(out, dueProbe{namespace: ns, e: e})
		}
	}
	return out
}

// probe asks the hosted API server of one entry for /readyz with a short timeout. Any answer
// but a server error means the server is reachable: the circuit closes, and whatever else is
// wrong (credentials, RBAC) shows in the next reconcile.
func (c *Clients) probe(ctx context.Context, p dueProbe) {
	if !c.hasSecret(ctx, p.namespace) {
		// The connector Secret is gone (the hosted cluster is being deleted): nothing will use
		// this client again, and nothing is probed for it.
		c.forgetEntry(p.namespace, p.e)
		return
	}
	start := time.Now()
	var status int
	pc, err := p.e.probeClient()
	if err == nil {
		status, err = c.send(ctx, p.e.probeURL, pc)
	} else {
		err = fmt.Errorf("build probe client: %w", err)
	}
	if err == nil && status >= http.StatusInternalServerError {
		err = fmt.Errorf("probe: /readyz answered %d %s", status, http.StatusText(status))
	}
	if c.opts.OnProbe != nil {
		c.opts.OnProbe(p.namespace, time.Since(start), err)
	}
	c.mu.Lock()
	if c.entries[p.namespace] != p.e {
		c.mu.Unlock() // the entry was rebuilt (new credentials) or evicted meanwhile
		return
	}
	if p.e.health.state != HealthProbing {
		c.mu.Unlock() // Reset closed it meanwhile
		return
	}
	if err != nil {
		c.open(p.e, err)
		c.mu.Unlock()
		return
	}
	p.e.health = health{state: HealthClosed}
	fns := append([]func(string){}, c.recovered...)
	c.mu.Unlock()
	for _, fn := range fns {
		fn(p.namespace)
	}
}

// firstContact asks a newly built client's API server for /readyz once, off the reconcile
// workers. Any answer, even a server error, closes the circuit: the server answers, so requests
// to it come back within the request timeout. No answer opens the circuit, and the prober takes
// over.
func (c *Clients) firstContact(namespace string, e *entry) {
	start := time.Now()
	_, err := c.send(context.Background(), e.probeURL, e.contactClient)
	if c.opts.OnProbe != nil {
		c.opts.OnProbe(namespace, time.Since(start), err)
	}
	c.mu.Lock()
	e.contactClient = nil
	defer close(e.contacted)
	if e.health.state != HealthProbing || e.health.openErr != nil {
		c.mu.Unlock() // Reset closed it, or a pass opened it, meanwhile
		return
	}
	if err != nil {
		c.open(e, err)
		c.mu.Unlock()
		return
	}
	e.health = health{state: HealthClosed}
	var fns []func(string)
	if e.awaited && c.entries[namespace] == e {
		fns = append(fns, c.recovered...)
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn(namespace)
	}
}

// hasSecret reports whether the connector Secret of a namespace may still exist: only a
// NotFound from the reader says it does not.
func (c *Clients) hasSecret(ctx context.Context, namespace string) bool {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: c.opts.SecretName}, secret)
	return !apierrors.IsNotFound(err)
}

// forgetEntry drops the client of a namespace if it is still e.
func (c *Clients) forgetEntry(namespace string, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[namespace] == e {
		delete(c.entries, namespace)
	}
}

// send asks a hosted API server for /readyz (url) with hc within ProbeTimeout and returns the
// status of its answer; the error says there was none.
func (c *Clients) send(ctx context.Context, url string, hc *http.Client) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	c.probes.Add(1)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	// Read (a little of) the answer, so that an HTTP/1.1 connection can carry the next request.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, nil
}

// Reset closes the circuit of a namespace, when something says its hosted API server is back
// (the HostedCluster turned Available): the next reconcile tries it at once.
func (c *Clients) Reset(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[namespace]; ok && e.health.state != HealthClosed {
		e.health = health{state: HealthClosed}
	}
}

// timedTransport reports how long each request to a hosted API server took.
type timedTransport struct {
	next    http.RoundTripper
	observe func(time.Duration)
}

func (t timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	t.observe(time.Since(start))
	return resp, err
}
