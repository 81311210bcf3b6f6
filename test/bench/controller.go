package main

import (
	"context"
	"fmt"
	"io"
	"time"

	dto "github.com/prometheus/client_model/go"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// controllerUnderTest is the pkgsync controller the benchmark measures: `pkgsync controller` as a
// process of its own (-controller process, as a user runs it), or its reconcilers in this
// process (-controller inline).
type controllerUnderTest interface {
	// packageInformer is an informer on Packages, for the trackers.
	packageInformer(ctx context.Context) (crcache.Informer, error)
	// gather reads the controller's Prometheus metrics.
	gather(ctx context.Context) (map[string]*dto.MetricFamily, error)
	// mgmtRequests counts the controller's requests to the management API server.
	mgmtRequests() counts
	// usage is the controller's CPU and memory now; peakRSS is VmHWM since resetPeakRSS.
	usage(ctx context.Context) usage
	resetPeakRSS()
	// liveHeap collects garbage and returns the heap that is left.
	liveHeap(ctx context.Context) (int64, error)
	// heapProfile writes the live heap for `go tool pprof`.
	heapProfile(ctx context.Context, w io.Writer) error
	// cpuProfile writes a CPU profile of the next d for `go tool pprof`.
	cpuProfile(ctx context.Context, d time.Duration, w io.Writer) error
	// hostedClientsBuilt is how many hosted clients were built so far; -1 when it cannot be
	// seen from outside (the process counts cached clients instead).
	hostedClientsBuilt() int
}

// usage is a controller's resources at one moment.
type usage struct {
	cpuSeconds float64
	heap       uint64
	goroutines int
	peakRSS    int64
	// fileRSS is the resident part of the RSS backed by files (the binary's text and tables):
	// GOMEMLIMIT does not bound it, and a container's memory accounting counts it.
	fileRSS          int64
	harnessCPU       float64
	harnessPeakRSS   int64
	harnessSeparated bool
}

// controllerCounters are what the snapshot reads from the controller's metrics.
type controllerCounters struct {
	reconciles     int
	reconcileTimes histogram
	probes         int
	hostedCached   int
}

// countersFrom reads controller-runtime's reconcile counter and reconcile-time histogram of
// the Package controller, the probes sent and the hosted clients cached.
func countersFrom(families map[string]*dto.MetricFamily) controllerCounters {
	var c controllerCounters
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			switch name {
			case "pkgsync_hosted_probe_duration_seconds":
				c.probes += int(m.GetHistogram().GetSampleCount())
				continue
			case "pkgsync_hosted_clusters":
				c.hostedCached += int(m.GetGauge().GetValue())
				continue
			}
			ours := false
			for _, l := range m.GetLabel() {
				ours = ours || l.GetName() == "controller" && l.GetValue() == "package"
			}
			if !ours {
				continue
			}
			switch name {
			case "controller_runtime_reconcile_total":
				c.reconciles += int(m.GetCounter().GetValue())
			case "controller_runtime_reconcile_time_seconds":
				// One series per controller process (-shards): their buckets add up.
				h := m.GetHistogram()
				first := len(c.reconcileTimes.bounds) == 0
				c.reconcileTimes.count += h.GetSampleCount()
				for i, b := range h.GetBucket() {
					if first {
						c.reconcileTimes.bounds = append(c.reconcileTimes.bounds, b.GetUpperBound())
						c.reconcileTimes.cumulative = append(c.reconcileTimes.cumulative, b.GetCumulativeCount())
					} else if i < len(c.reconcileTimes.cumulative) {
						c.reconcileTimes.cumulative[i] += b.GetCumulativeCount()
					}
				}
			}
		}
	}
	return c
}

// metricValue is the value of a gauge or counter family without labels (go_goroutines).
func metricValue(families map[string]*dto.MetricFamily, name string) float64 {
	fam, ok := families[name]
	if !ok || len(fam.GetMetric()) == 0 {
		return 0
	}
	m := fam.GetMetric()[0]
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

func byName(fams []*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func controllerMode(name string) error {
	switch name {
	case "process", "inline":
		return nil
	}
	return fmt.Errorf("-controller %q: want process or inline", name)
}
