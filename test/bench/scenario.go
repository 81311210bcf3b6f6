package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// result is what one scenario cost.
type result struct {
	name string
	// packages is the fleet; healthy those whose hosted cluster answers, the ones the scenario
	// times; dead the others.
	packages, healthy, dead int
	objects                 int // per Package
	// duration is from the scenario's first request to the last healthy Package reaching its state.
	duration time.Duration
	// latencies are per healthy Package, from its own request (create, reconcile request) on.
	latencies []time.Duration
	// reached counts the healthy Packages that got there before the timeout.
	reached int
	// deadReached counts the dead Packages that reached Ready=False HostedClusterUnavailable
	// (having handled the scenario's request), deadDuration when the last of them did.
	deadReached  int
	deadDuration time.Duration
	reconciles   int
	// slowReconciles took more than slowReconcile: a worker held that long. slowestReconcile is
	// the bucket bound of the slowest reconcile (it took at most that, more than the bound below).
	slowReconciles   int
	slowestReconcile float64
	// cpu is the controller's CPU seconds; harnessCPU the harness's, when they are apart.
	cpu, harnessCPU float64
	// serverCPU is the CPU seconds of the API servers, etcd and the registry, by role.
	serverCPU map[string]float64
	mem       memory
	// mgmt is counted at the controller's transport, hosted at the hosted API servers,
	// registry at the proxy in front of it.
	mgmt, hosted, registry counts
	// hostedClients were built during the scenario, or with hostedCachedOnly are cached at its end.
	hostedClients    int
	hostedCachedOnly bool
	// raw is the raw server-side apply of the same objects, measured before converge (the
	// management shapes only).
	raw *rawLimit
	// probes the prober sent; deadConnections the dead hosted API servers accepted (probes and
	// reconciles).
	probes, deadConnections int
}

// slowReconcile is a bucket bound of controller_runtime_reconcile_time_seconds: a reconcile
// that took longer waited on something, a dead hosted API server in this benchmark.
const slowReconcile = 5.0

// snapshot is every counter at one moment.
type snapshot struct {
	at                     time.Time
	cpu, harnessCPU        float64
	servers                map[string]float64
	reconciles             int
	reconcileTimes         histogram
	mgmt, hosted, registry counts
	hostedClients          int
	// hostedCachedOnly says hostedClients counts the cached clients (a controller process does
	// not tell how many it built).
	hostedCachedOnly        bool
	probes, deadConnections int
}

// histogram is a cumulative Prometheus histogram: count observations, bounds ascending,
// cumulative[i] of them at most bounds[i].
type histogram struct {
	count      uint64
	bounds     []float64
	cumulative []uint64
}

// minus returns the observations made since before, of the same histogram.
func (h histogram) minus(before histogram) histogram {
	out := histogram{count: h.count - before.count, bounds: h.bounds, cumulative: slices.Clone(h.cumulative)}
	for i := range out.cumulative {
		if i < len(before.cumulative) {
			out.cumulative[i] -= before.cumulative[i]
		}
	}
	return out
}

// over counts the observations above bound (a bucket bound).
func (h histogram) over(bound float64) int {
	for i, b := range h.bounds {
		if b == bound {
			return int(h.count - h.cumulative[i])
		}
	}
	return 0
}

// maxBound is the smallest bucket bound that every observation is under (+Inf past the last,
// 0 without observations).
func (h histogram) maxBound() float64 {
	if h.count == 0 {
		return 0
	}
	for i, b := range h.bounds {
		if h.cumulative[i] == h.count {
			return b
		}
	}
	return math.Inf(1)
}

// snapshot reads every counter a scenario reports. Before the controller process starts
// (-arrival restart) its own counters are zero, as the process starts them.
func (env *environment) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), servers: serverCPU(env.mgmt.Config.Host), mgmt: counts{}, registry: env.proxy.snapshot(), hosted: counts{}}
	if env.ctl != nil {
		u := env.ctl.usage(ctx)
		s.cpu, s.harnessCPU, s.mgmt = u.cpuSeconds, u.harnessCPU, env.ctl.mgmtRequests()
	}
	for _, d := range env.dead {
		s.deadConnections += int(d.accepted.Load())
	}
	for _, cp := range env.hosted {
		c, err := serverCounts(ctx, cp.Config)
		if err != nil {
			return s, fmt.Errorf("%s: %w", cp.Name, err)
		}
		for k, v := range c {
			s.hosted[k] += v
		}
	}
	if env.ctl == nil {
		return s, nil
	}
	fams, err := env.ctl.gather(ctx)
	if err != nil {
		return s, err
	}
	c := countersFrom(fams)
	s.reconciles, s.reconcileTimes, s.probes = c.reconciles, c.reconcileTimes, c.probes
	if s.hostedClients = env.ctl.hostedClientsBuilt(); s.hostedClients < 0 {
		s.hostedClients, s.hostedCachedOnly = c.hostedCached, true
	}
	return s, nil
}

// between fills the counters of r from two snapshots.
func (r *result) between(before, after snapshot) {
	r.cpu = after.cpu - before.cpu
	r.harnessCPU = after.harnessCPU - before.harnessCPU
	r.serverCPU = map[string]float64{}
	for role, v := range after.servers {
		r.serverCPU[role] = v - before.servers[role]
	}
	r.reconciles = after.reconciles - before.reconciles
	times := after.reconcileTimes.minus(before.reconcileTimes)
	r.slowReconciles, r.slowestReconcile = times.over(slowReconcile), times.maxBound()
	r.probes = after.probes - before.probes
	r.deadConnections = after.deadConnections - before.deadConnections
	r.mgmt = after.mgmt.minus(before.mgmt)
	r.hosted = after.hosted.minus(before.hosted)
	r.registry = after.registry.minus(before.registry)
	r.hostedClients, r.hostedCachedOnly = after.hostedClients-before.hostedClients, after.hostedCachedOnly
	if after.hostedCachedOnly {
		r.hostedClients = after.hostedClients
	}
}

// waitFor waits until done closes or timeout passes, and fills durations from the tracker.
func (r *result) waitFor(ctx context.Context, t *tracker, done <-chan struct{}, start time.Time, requested map[string]time.Time, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	select {
	case <-done:
	case <-timer.C:
		waitErr = fmt.Errorf("%s: only %d of %d healthy Packages got there within %s", r.name, len(t.times()), r.healthy, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	reached := t.times()
	r.reached = len(reached)
	var last time.Time
	for key, at := range reached {
		if at.After(last) {
			last = at
		}
		if from, ok := requested[key]; ok {
			r.latencies = append(r.latencies, at.Sub(from))
		}
	}
	r.duration = last.Sub(start)
	if waitErr != nil {
		r.duration = time.Since(start)
	}
	return waitErr
}

// waitForDead waits, after the healthy Packages, until the dead ones reached
// HostedClusterUnavailable (done closes) or timeout passes since start. The scenario ends only
// then, so that the next one starts with every Package settled; its wall time stays that of the
// healthy Packages.
func (r *result) waitForDead(ctx context.Context, t *tracker, done <-chan struct{}, start time.Time, timeout time.Duration) error {
	timer := time.NewTimer(max(0, timeout-time.Since(start)))
	defer timer.Stop()
	var waitErr error
	select {
	case <-done:
	case <-timer.C:
		waitErr = fmt.Errorf("%s: only %d of %d dead Packages reached %s within %s", r.name, len(t.times()), r.dead, v1alpha1.HostedClusterUnavailableReason, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	reached := t.times()
	r.deadReached = len(reached)
	for _, at := range reached {
		r.deadDuration = max(r.deadDuration, at.Sub(start))
	}
	return waitErr
}
