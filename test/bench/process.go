package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cpuSeconds is the user and system CPU time this process has used: the controller and the
// harness, not the API servers, etcd or the registry, which are processes of their own.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// procStatus reads a kB field (VmHWM, VmRSS) of /proc/PID/status ("self" for this process), in
// bytes.
func procStatus(pid, field string) int64 {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// resetPeakRSS starts VmHWM of a process over from its current RSS (Linux 4.0+), so each
// scenario reports its own peak.
func resetPeakRSS(pid string) {
	_ = os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0)
}

// sampleEvery is how often the sampler reads the controller's heap and goroutines. A process
// controller is read through its /metrics, which at 1000 Packages has tens of thousands of
// series: scraping it every second cost the controller a fifth of its CPU. The peak RSS is the
// kernel's (VmHWM), exact whatever the interval; the heap peak is a sample.
const sampleEvery = 10 * time.Second

// sampler tracks the controller's peak Go heap and goroutine count between resets.
type sampler struct {
	ctl controllerUnderTest

	mu             sync.Mutex
	peakHeap       uint64
	peakGoroutines int
}

func (s *sampler) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample(ctx context.Context) usage {
	u := s.ctl.usage(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peakHeap = max(s.peakHeap, u.heap)
	s.peakGoroutines = max(s.peakGoroutines, u.goroutines)
	return u
}

// reset starts the peaks over, with the peak RSS.
func (s *sampler) reset(ctx context.Context) {
	s.mu.Lock()
	s.peakHeap, s.peakGoroutines = 0, 0
	s.mu.Unlock()
	s.ctl.resetPeakRSS()
	s.sample(ctx)
}

// memory is what a scenario cost in memory.
type memory struct {
	PeakHeap, LiveHeap, PeakRSS int64
	// FileRSS is the file-backed resident memory at the scenario's end (usage.fileRSS).
	FileRSS        int64
	PeakGoroutines int
	// HarnessPeakRSS is the benchmark's own peak, when the controller is a process of its own.
	HarnessPeakRSS int64
}

// read samples once more, then collects garbage to measure the live heap.
func (s *sampler) read(ctx context.Context) memory {
	u := s.sample(ctx)
	live, err := s.ctl.liveHeap(ctx)
	if err != nil {
		progress("live heap: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := memory{PeakHeap: int64(s.peakHeap), LiveHeap: live, PeakRSS: u.peakRSS, FileRSS: u.fileRSS, PeakGoroutines: s.peakGoroutines}
	if u.harnessSeparated {
		m.HarnessPeakRSS = u.harnessPeakRSS
	}
	return m
}

// percentile returns the p-th percentile (0-100) of ds by the nearest-rank method.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(p/100*float64(len(s)) + 0.999999)
	return s[min(max(rank, 1), len(s))-1]
}

// writeCPUProfile writes a CPU profile of the controller over the next d, for `go tool pprof`.
func writeCPUProfile(ctx context.Context, ctl controllerUnderTest, path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create CPU profile: %w", err)
	}
	if err := ctl.cpuProfile(ctx, d, f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write CPU profile: %w", err)
	}
	return f.Close()
}

// writeHeapProfile writes the controller's live heap, for `go tool pprof`.
func writeHeapProfile(ctx context.Context, ctl controllerUnderTest, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create heap profile: %w", err)
	}
	if err := ctl.heapProfile(ctx, f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write heap profile: %w", err)
	}
	return f.Close()
}
