package hosted

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
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
type UnavailableError struct {
	Namespace string
	// Err is the failure that opened the circuit, or the last failed probe.
	Err error
	// NextProbe is when the prober tries the API server again.
	NextProbe time.Time
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("hosted API server of %s does not answer: %v; next probe at %s", e.Namespace, e.Err, e.NextProbe.UTC().Format(time.RFC3339))
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// health is the circuit of one entry; Clients.mu guards it.
type health struct {
	state     Health
	failures  int
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
	e.health.failures++
	e.health.lastErr = err
	e.health.state = HealthOpen
	e.health.nextProbe = c.now().Add(c.backoff(e.health.failures))
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

// dueProbes marks the open circuits whose next probe is due as probing and returns them.
func (c *Clients) dueProbes() []dueProbe {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var out []dueProbe
	for ns, e := range c.entries {
		if e.health.state == HealthOpen && !now.Before(e.health.nextProbe) {
			e.health.state = HealthProbing
			out = append(out, dueProbe{namespace: ns, e: e})
		}
	}
	return out
}

// probe asks the hosted API server of one entry for /readyz with a short timeout. Any answer
// but a server error means the server is reachable: the circuit closes, and whatever else is
// wrong (credentials, RBAC) shows in the next reconcile.
func (c *Clients) probe(ctx context.Context, p dueProbe) {
	start := time.Now()
	err := c.send(ctx, p.e)
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

func (c *Clients) send(ctx context.Context, e *entry) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.probeURL, nil)
	if err != nil {
		return err
	}
	c.probes.Add(1)
	resp, err := e.probeClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("probe: /readyz answered %s", resp.Status)
	}
	return nil
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

// probeClient returns an HTTP client for the probe, with the hosted client's credentials and TLS.
func probeClient(cfg *rest.Config, timeout time.Duration) (*http.Client, error) {
	pc := rest.CopyConfig(cfg)
	pc.Timeout = timeout
	return rest.HTTPClientFor(pc)
}
