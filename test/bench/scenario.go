package main

import (
	"context"
	"fmt"
	"time"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// result is what one scenario cost.
type result struct {
	name     string
	packages int
	objects  int // per Package
	// duration is from the scenario's first request to the last Package reaching its state.
	duration time.Duration
	// latencies are per Package, from its own request (create, reconcile request) on.
	latencies []time.Duration
	// reached counts the Packages that got there before the timeout.
	reached    int
	reconciles int
	cpu        float64
	mem        memory
	// mgmt is counted at the controller's transport, hosted at the hosted API servers,
	// registry at the proxy in front of it.
	mgmt, hosted, registry counts
	hostedClients          int
}

// snapshot is every counter at one moment.
type snapshot struct {
	at                     time.Time
	cpu                    float64
	reconciles             int
	mgmt, hosted, registry counts
	hostedClients          int
}

func (env *environment) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), cpu: cpuSeconds(), mgmt: env.api.snapshot(), registry: env.proxy.snapshot(), hosted: counts{}}
	for _, cp := range env.hosted {
		c, err := serverCounts(ctx, cp.Config)
		if err != nil {
			return s, fmt.Errorf("%s: %w", cp.Name, err)
		}
		for k, v := range c {
			s.hosted[k] += v
		}
	}
	var err error
	if s.reconciles, err = reconcileTotal(); err != nil {
		return s, err
	}
	_, s.hostedClients = env.hostedClients.Stats()
	return s, nil
}

// reconcileTotal reads controller-runtime's reconcile counter of the Package controller.
func reconcileTotal() (int, error) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather controller metrics: %w", err)
	}
	n := 0
	for _, fam := range families {
		if fam.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "package" {
					n += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return n, nil
}

// between fills the counters of r from two snapshots.
func (r *result) between(before, after snapshot) {
	r.cpu = after.cpu - before.cpu
	r.reconciles = after.reconciles - before.reconciles
	r.mgmt = after.mgmt.minus(before.mgmt)
	r.hosted = after.hosted.minus(before.hosted)
	r.registry = after.registry.minus(before.registry)
	r.hostedClients = after.hostedClients - before.hostedClients
}

// waitFor waits until done closes or timeout passes, and fills durations from the tracker.
func (r *result) waitFor(ctx context.Context, t *tracker, done <-chan struct{}, start time.Time, requested map[string]time.Time, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	select {
	case <-done:
	case <-timer.C:
		waitErr = fmt.Errorf("%s: only %d of %d Packages got there within %s", r.name, len(t.times()), r.packages, timeout)
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
