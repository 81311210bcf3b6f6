package reconciler

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// Metrics adds what Flux's reconcile metrics (duration, readiness, suspend) do not cover:
// pulls and applied objects.
type Metrics struct {
	PullDuration *prometheus.HistogramVec
	Pulls        *prometheus.CounterVec
	PullBytes    *prometheus.CounterVec
	objects      *prometheus.CounterVec
	// The render cache: results held and their estimated size.
	renderCacheEntries, renderCacheBytes prometheus.Gauge
	// Hosted clusters: how many per health state, probe latency, time spent waiting on them.
	hostedStates   *prometheus.GaugeVec
	nextProbe      *prometheus.GaugeVec
	probeDuration  *prometheus.HistogramVec
	hostedRequests prometheus.Counter
	// Fleets: members per state, time each partition took to roll out.
	FleetMembers      *prometheus.GaugeVec
	PartitionDuration *prometheus.HistogramVec
	// Registry notifications: time from a wake to the resolution it asked for.
	WakeResolution prometheus.Histogram
	// Drift: objects left drifted per installation (driftPolicy Report), drift corrected.
	Drifted        *prometheus.GaugeVec
	DriftCorrected *prometheus.CounterVec
}

func NewMetrics() *Metrics {
	return &Metrics{
		PullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pkgsync_pull_duration_seconds",
			Help:    "Time to pull and unpack a package image that was not in the cache.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"registry"}),
		Pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkgsync_pulls_total",
			Help: "Package pulls by outcome: rendered (cache miss), cached (render cache hit), failed.",
		}, []string{"outcome"}),
		PullBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkgsync_pull_bytes_total",
			Help: "Unpacked bytes of package images pulled and rendered (render cache misses).",
		}, []string{"registry"}),
		hostedStates: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pkgsync_hosted_clusters",
			Help: "Hosted clusters with a cached client, by health state: Closed (reachable), Open (failing fast until a probe succeeds), Probing.",
		}, []string{"state"}),
		nextProbe: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pkgsync_hosted_next_probe_timestamp_seconds",
			Help: "When the hosted API server of a hosted-control-plane namespace whose circuit is open is probed next (Unix time); no series for reachable ones.",
		}, []string{"namespace"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pkgsync_hosted_probe_duration_seconds",
			Help:    "Probes of unreachable hosted API servers, by outcome (success, failure).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"outcome"}),
		hostedRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pkgsync_hosted_request_seconds_total",
			Help: "Time spent waiting on hosted API servers, summed over every request.",
		}),
		FleetMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pkgsync_fleet_members",
			Help: "Members of a HostedClusterPackage by state: total, updated (on the target revision), ready, failed, blocked, held.",
		}, []string{"fleet", "state"}),
		PartitionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pkgsync_fleet_partition_rollout_duration_seconds",
			Help:    "Time from a partition's start to the end of its rollout (soak included), per HostedClusterPackage.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}, []string{"fleet"}),
		WakeResolution: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pkgsync_webhook_resolution_seconds",
			Help:    "Time from a registry notification waking the resources that follow a repository to the first tag resolution made for it.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}),
		renderCacheEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkgsync_render_cache_entries",
			Help: "Rendered packages held by the render cache.",
		}),
		renderCacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pkgsync_render_cache_bytes",
			Help: "Estimated memory of the rendered packages held by the render cache (bounded by Options.RenderCacheBytes).",
		}),
		Drifted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pkgsync_drifted_objects",
			Help: "Objects an installation with driftPolicy Report found drifted in its last apply pass and left as they are.",
		}, []string{"kind", "namespace", "name"}),
		DriftCorrected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkgsync_drift_corrected_objects_total",
			Help: "Drifted objects applied again (driftPolicy Correct), by kind of the installation.",
		}, []string{"kind"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pkgsync_objects_applied_total",
			Help: "Objects handled by apply passes, by action: created, configured, unchanged, pruned.",
		}, []string{"kind", "action"}),
	}
}

// Register adds the collectors to controller-runtime's registry; when a manager was set up
// before in this process (tests restart it), the registered collectors are reused.
func (m *Metrics) Register() error {
	var err error
	if m.PullDuration, err = registerOrReuse(m.PullDuration); err != nil {
		return err
	}
	if m.Pulls, err = registerOrReuse(m.Pulls); err != nil {
		return err
	}
	if m.PullBytes, err = registerOrReuse(m.PullBytes); err != nil {
		return err
	}
	if m.hostedStates, err = registerOrReuse(m.hostedStates); err != nil {
		return err
	}
	if m.nextProbe, err = registerOrReuse(m.nextProbe); err != nil {
		return err
	}
	if m.probeDuration, err = registerOrReuse(m.probeDuration); err != nil {
		return err
	}
	if m.hostedRequests, err = registerOrReuse(m.hostedRequests); err != nil {
		return err
	}
	if m.FleetMembers, err = registerOrReuse(m.FleetMembers); err != nil {
		return err
	}
	if m.PartitionDuration, err = registerOrReuse(m.PartitionDuration); err != nil {
		return err
	}
	if m.WakeResolution, err = registerOrReuse(m.WakeResolution); err != nil {
		return err
	}
	if m.renderCacheEntries, err = registerOrReuse(m.renderCacheEntries); err != nil {
		return err
	}
	if m.renderCacheBytes, err = registerOrReuse(m.renderCacheBytes); err != nil {
		return err
	}
	if m.Drifted, err = registerOrReuse(m.Drifted); err != nil {
		return err
	}
	if m.DriftCorrected, err = registerOrReuse(m.DriftCorrected); err != nil {
		return err
	}
	m.objects, err = registerOrReuse(m.objects)
	return err
}

// ObserveHosted wires the hosted clients' observations into the metrics.
func (m *Metrics) ObserveHosted(c *hosted.Clients) {
	c.Observe(func(took time.Duration) { m.hostedRequests.Add(took.Seconds()) },
		func(_ string, took time.Duration, err error) {
			outcome := "success"
			if err != nil {
				outcome = "failure"
			}
			m.probeDuration.WithLabelValues(outcome).Observe(took.Seconds())
		})
}

// ObserveRenderCache records the render cache's size: its entries and their estimated bytes.
func (m *Metrics) ObserveRenderCache(entries int, bytes int64) {
	m.renderCacheEntries.Set(float64(entries))
	m.renderCacheBytes.Set(float64(bytes))
}

// RefreshHostedStates refreshes the hosted-cluster gauges from c while the manager runs.
func (m *Metrics) RefreshHostedStates(c *hosted.Clients) manager.Runnable {
	return hostedStatesRunnable{m: m, c: c}
}

// hostedStatesRunnable refreshes pkgsync_hosted_clusters and
// pkgsync_hosted_next_probe_timestamp_seconds every few seconds.
type hostedStatesRunnable struct {
	m *Metrics
	c *hosted.Clients
}

func (r hostedStatesRunnable) Start(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		for state, n := range r.c.States() {
			r.m.hostedStates.WithLabelValues(string(state)).Set(float64(n))
		}
		r.m.nextProbe.Reset()
		for ns, at := range r.c.NextProbes() {
			r.m.nextProbe.WithLabelValues(ns).Set(float64(at.Unix()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func registerOrReuse[C prometheus.Collector](c C) (C, error) {
	if err := crmetrics.Registry.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// ObservePass counts what an apply pass applied, by the kind of its owner.
func (m *Metrics) ObservePass(ownerKind string, res *apply.Result) {
	if m == nil || res == nil {
		return
	}
	for action, n := range map[string]int{"created": res.Created, "configured": res.Updated, "unchanged": res.Unchanged, "pruned": res.Pruned} {
		if n > 0 {
			m.objects.WithLabelValues(ownerKind, action).Add(float64(n))
		}
	}
}
