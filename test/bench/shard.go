package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// shardLabel is the label -shards spreads the Packages over: Package i of the fleet has the
// value i mod shards, and the controller process of shard s reconciles only those with s
// (--watch-label-selector), as a platform team shards a fleet too large for one process.
const shardLabel = "bench.pkgsync.dev/shard"

// shardLabels are the labels of the fleet's Package i: its shard's, with -shards above 1.
func shardLabels(o options, i int) map[string]string {
	if o.shards <= 1 {
		return nil
	}
	return map[string]string{shardLabel: strconv.Itoa(i % o.shards)}
}

// shardedController is -shards controller processes, measured as one controller: their CPU
// seconds, heaps, requests and metrics add up; the peak RSS is the largest shard's, since each
// process is a pod of its own with its own memory limit. Each shard's own memory and CPU are
// printed when a scenario ends (perShard).
type shardedController struct {
	shards []*processController
	// live is each shard's live heap as liveHeap last read it, for perShard.
	live []int64
}

func startShardedController(ctx context.Context, env *environment, o options) (*shardedController, <-chan error, error) {
	s := &shardedController{}
	var stops []<-chan error
	for i := range o.shards {
		c, stopped, err := startProcessController(ctx, env, o, i)
		if c != nil {
			s.shards = append(s.shards, c)
			stops = append(stops, stopped)
		}
		if err != nil {
			return s, waitAll(stops), fmt.Errorf("shard %d: %w", i, err)
		}
	}
	progress("%d controller processes, one per shard (--watch-label-selector %s=<shard>)", o.shards, shardLabel)
	return s, waitAll(stops), nil
}

// waitAll returns a channel that yields the first error of stops once every one has ended.
func waitAll(stops []<-chan error) <-chan error {
	out := make(chan error, 1)
	go func() {
		var errs []error
		for _, s := range stops {
			errs = append(errs, <-s)
		}
		out <- errors.Join(errs...)
	}()
	return out
}

func (s *shardedController) proxies() []*apiProxy {
	out := make([]*apiProxy, 0, len(s.shards))
	for _, c := range s.shards {
		out = append(out, c.api)
	}
	return out
}

func (s *shardedController) packageInformer(ctx context.Context) (crcache.Informer, error) {
	return s.shards[0].packageInformer(ctx)
}

// gather merges the shards' metric families: each family holds every shard's series, which
// countersFrom and the report add up.
func (s *shardedController) gather(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	out := map[string]*dto.MetricFamily{}
	for i, c := range s.shards {
		fams, err := c.gather(ctx)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		for name, f := range fams {
			if merged, ok := out[name]; ok {
				merged.Metric = append(merged.Metric, f.Metric...)
				continue
			}
			out[name] = f
		}
	}
	return out, nil
}

func (s *shardedController) mgmtRequests() counts {
	out := counts{}
	for _, c := range s.shards {
		for k, v := range c.mgmtRequests() {
			out[k] += v
		}
	}
	return out
}

func (s *shardedController) usage(ctx context.Context) usage {
	var out usage
	for i, c := range s.shards {
		u := c.usage(ctx)
		out.cpuSeconds += u.cpuSeconds
		out.heap += u.heap
		out.goroutines += u.goroutines
		out.peakRSS = max(out.peakRSS, u.peakRSS)
		out.fileRSS = max(out.fileRSS, u.fileRSS)
		if i == 0 {
			out.harnessCPU, out.harnessPeakRSS, out.harnessSeparated = u.harnessCPU, u.harnessPeakRSS, u.harnessSeparated
		}
	}
	return out
}

func (s *shardedController) resetPeakRSS() {
	for _, c := range s.shards {
		c.resetPeakRSS()
	}
}

func (s *shardedController) liveHeap(ctx context.Context) (int64, error) {
	var sum int64
	s.live = make([]int64, len(s.shards))
	for i, c := range s.shards {
		live, err := c.liveHeap(ctx)
		if err != nil {
			return 0, fmt.Errorf("shard %d: %w", i, err)
		}
		s.live[i] = live
		sum += live
	}
	return sum, nil
}

// heapProfile and cpuProfile are shard 0's: the shards run the same code on equal halves.
func (s *shardedController) heapProfile(ctx context.Context, w io.Writer) error {
	return s.shards[0].heapProfile(ctx, w)
}

func (s *shardedController) cpuProfile(ctx context.Context, d time.Duration, w io.Writer) error {
	return s.shards[0].cpuProfile(ctx, d, w)
}

func (s *shardedController) hostedClientsBuilt() int { return -1 }

// perShard prints each shard's CPU seconds since start, peak RSS since the last reset and the
// live heap the scenario's end measured (liveHeap: one collection per shard, not two), for the
// scenario that just ended.
func (s *shardedController) perShard(ctx context.Context, scenario string) {
	for i, c := range s.shards {
		u := c.usage(ctx)
		var live int64
		if i < len(s.live) {
			live = s.live[i]
		}
		progress("%s: shard %d: cpu_s_total=%.1f peak_rss_mib=%.0f live_heap_mib=%.1f", scenario, i, u.cpuSeconds, float64(u.peakRSS)/(1<<20), float64(live)/(1<<20))
	}
}
