package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
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

// procStatus reads a kB field (VmHWM, VmRSS) of /proc/self/status, in bytes.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
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

// resetPeakRSS starts VmHWM over from the current RSS (Linux 4.0+), so each scenario reports
// its own peak.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// sampler tracks the peak Go heap and goroutine count between resets.
type sampler struct {
	mu                  sync.Mutex
	peakHeap, peakInuse uint64
	peakGoroutines      int
}

func (s *sampler) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g := runtime.NumGoroutine()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peakHeap = max(s.peakHeap, ms.HeapAlloc)
	s.peakInuse = max(s.peakInuse, ms.HeapInuse)
	s.peakGoroutines = max(s.peakGoroutines, g)
}

// reset starts the peaks over, with the peak RSS.
func (s *sampler) reset() {
	s.mu.Lock()
	s.peakHeap, s.peakInuse, s.peakGoroutines = 0, 0, 0
	s.mu.Unlock()
	resetPeakRSS()
	s.sample()
}

// memory is what a scenario cost in memory.
type memory struct {
	PeakHeap, LiveHeap, PeakRSS int64
	PeakGoroutines, Goroutines  int
}

// read samples once more, then collects garbage to measure the live heap.
func (s *sampler) read() memory {
	s.sample()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.mu.Lock()
	defer s.mu.Unlock()
	return memory{
		PeakHeap: int64(s.peakHeap), LiveHeap: int64(ms.HeapAlloc), PeakRSS: procStatus("VmHWM"),
		PeakGoroutines: s.peakGoroutines, Goroutines: runtime.NumGoroutine(),
	}
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

// writeHeapProfile writes the live heap, for `go tool pprof`.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write heap profile: %w", err)
	}
	return f.Close()
}
