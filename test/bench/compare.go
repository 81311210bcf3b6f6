package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// compareOptions run the fleet with no hosted cluster dead and with some dead, and compare.
type compareOptions struct {
	// percents is the -compare-dead list, e.g. "1,5".
	percents string
	// limit is -compare-limit: the run with the controller's memory limit against one without.
	limit  bool
	repeat int
	// quietLoad, when above 0, is the 1-minute load average each run waits for, at most quietMax.
	quietLoad float64
	quietMax  time.Duration
}

// goalRatio is issue 19's goal: with dead hosted clusters, the healthy Packages converge and
// take an update wave in at most 1.2 times what they take with none dead.
const goalRatio = 1.2

func (c *compareOptions) applyFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.percents, "compare-dead", "", "Run the fleet with no hosted cluster dead, then with each of these percents dead (comma-separated, e.g. 1,5), each run in a fresh process with the other flags, and print converge and update-wave times with their ratios")
	fs.BoolVar(&c.limit, "compare-limit", false, "Run the fleet with the controller's memory limit (-gomemlimit, default the Deployment's) and without one, each run in a fresh process with the other flags, and print converge and update-wave times, the controller's CPU and peak RSS, and the ratios of the times (goal <= 1.2)")
	fs.IntVar(&c.repeat, "repeat", 1, "With -compare-dead or -compare-limit: runs of each configuration, interleaved; the ratios compare medians")
	fs.Float64Var(&c.quietLoad, "quiet-load", 0, "With -compare-dead or -compare-limit: before each run, wait until the 1-minute load average is below this (0: do not wait)")
	fs.DurationVar(&c.quietMax, "quiet-max", 20*time.Minute, "With -compare-dead or -compare-limit: the longest wait for -quiet-load; the run starts anyway after it")
}

// compareFlags are this mode's own flags (and -dead-percent, which it sets per run): not passed on.
var compareFlags = []string{"compare-dead", "compare-limit", "repeat", "quiet-load", "quiet-max", "dead-percent"}

// deadRun is one run of the fleet in a child process.
type deadRun struct {
	percent float64
	round   int
	// load is the 1-minute load average when the run started; quiet whether it was below
	// -quiet-load (always true without it).
	load  float64
	quiet bool
	// bench holds the BENCH figures by scenario, then by key.
	bench map[string]map[string]string
	err   error
}

func (r deadRun) figure(scenario, key string) float64 {
	v, err := strconv.ParseFloat(r.bench[scenario][key], 64)
	if err != nil {
		return 0
	}
	return v
}

// total adds a counter over every scenario of the run.
func (r deadRun) total(key string) int {
	n := 0
	for _, sc := range r.bench {
		v, _ := strconv.Atoi(sc[key])
		n += v
	}
	return n
}

// runCompare runs the fleet without dead hosted clusters and with each percent of c.percents,
// c.repeat times, interleaved, each in a child process of this program with the flags of fs
// (so with fresh API servers, registry and controller metrics), and prints the comparison.
func runCompare(ctx context.Context, fs *flag.FlagSet, c compareOptions) error {
	percents := []float64{0}
	for _, p := range strings.Split(c.percents, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 || v >= 100 {
			return fmt.Errorf("-compare-dead: %q is not a percent above 0 and below 100", p)
		}
		percents = append(percents, v)
	}
	if c.repeat < 1 {
		return errors.New("-repeat must be at least 1")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run it again: %w", err)
	}
	var args []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(compareFlags, f.Name) {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	packages := fs.Lookup("packages").Value.String()

	started := time.Now()
	var runs []deadRun
	var errs []error
	for round := 1; round <= c.repeat; round++ {
		for _, p := range percents {
			r := deadRun{percent: p, round: round}
			if r.load, r.quiet, err = waitForQuiet(ctx, c.quietLoad, c.quietMax); err != nil {
				return err
			}
			progress("compare: run %d of %d: %g %% of %s hosted clusters dead (load %.2f)", len(runs)+1, c.repeat*len(percents), p, packages, r.load)
			r.bench, r.err = runChild(ctx, exe, append(slices.Clone(args), fmt.Sprintf("-dead-percent=%g", p)))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.err != nil {
				errs = append(errs, fmt.Errorf("run with %g %% dead: %w", p, r.err))
			}
			runs = append(runs, r)
		}
	}
	printComparison(os.Stdout, packages, c, percents, runs, time.Since(started))
	return errors.Join(errs...)
}

// runChild runs this program with args, passes its output on, and returns its BENCH figures.
func runChild(ctx context.Context, exe string, args []string) (map[string]map[string]string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout = io.MultiWriter(os.Stdout, &out)
	cmd.Stderr = os.Stderr
	// Interrupted, the child stops its API servers and registry before it exits.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	runErr := cmd.Run()
	bench := map[string]map[string]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		fields, ok := strings.CutPrefix(sc.Text(), "BENCH ")
		if !ok {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(fields) {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		bench[kv["scenario"]] = kv
	}
	if runErr == nil && (bench["converge"] == nil || bench["update"] == nil) {
		runErr = errors.New("no BENCH line for converge or update")
	}
	return bench, runErr
}

// loadAverage is the 1-minute load average.
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, fmt.Errorf("read load average: %w", err)
	}
	first, _, _ := strings.Cut(string(b), " ")
	return strconv.ParseFloat(first, 64)
}

// waitForQuiet polls the load average every 30 s until it is below threshold or max passed,
// and returns the last reading and whether it was below. Other work on the machine (and the
// previous run's API servers, still in the 1-minute average) would otherwise land in the run.
func waitForQuiet(ctx context.Context, threshold float64, maxWait time.Duration) (float64, bool, error) {
	deadline := time.Now().Add(maxWait)
	for {
		load, err := loadAverage()
		if err != nil || threshold <= 0 {
			return load, true, nil // without /proc/loadavg, run unconditioned
		}
		if load < threshold {
			return load, true, nil
		}
		if !time.Now().Before(deadline) {
			progress("compare: load %.2f still not below %.2f after %s; running anyway", load, threshold, maxWait)
			return load, false, nil
		}
		progress("compare: load %.2f, waiting for it to drop below %.2f", load, threshold)
		select {
		case <-ctx.Done():
			return load, false, ctx.Err()
		case <-time.After(30 * time.Second):
		}
	}
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// printComparison prints every run, then per percent the median converge and update-wave times
// of the healthy Packages and their ratios to the runs with none dead, and COMPARE lines.
func printComparison(w io.Writer, packages string, c compareOptions, percents []float64, runs []deadRun, elapsed time.Duration) {
	fmt.Fprintf(w, "\npkgsync fleet benchmark, dead hosted clusters: %s Packages, %d run(s) per configuration, %d CPUs, %s, took %s\n\n",
		packages, c.repeat, runtime.NumCPU(), runtime.Version(), elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dead %\tdead\trun\tload 1m\tconverge (s)\tupdate (s)\tdead Unavailable: converge / update\tprobes\tconnections to dead\treconciles over 5 s\t")
	for _, r := range runs {
		load := fmt.Sprintf("%.2f", r.load)
		if !r.quiet {
			load += "*"
		}
		if r.err != nil && r.bench["update"] == nil {
			fmt.Fprintf(tw, "%g\t\t%d\t%s\tfailed: %v\t\t\t\t\t\t\n", r.percent, r.round, load, r.err)
			continue
		}
		fmt.Fprintf(tw, "%g\t%s\t%d\t%s\t%.2f\t%.2f\t%s/%s in %ss / %s/%s\t%d\t%d\t%d\t\n", r.percent, r.bench["converge"]["dead"], r.round, load,
			r.figure("converge", "total_s"), r.figure("update", "total_s"),
			r.bench["converge"]["dead_unavailable"], r.bench["converge"]["dead"], r.bench["converge"]["dead_unavailable_s"],
			r.bench["update"]["dead_unavailable"], r.bench["update"]["dead"],
			r.total("probes"), r.total("dead_connections"), r.total("reconciles_over_5s"))
	}
	_ = tw.Flush()
	if slices.ContainsFunc(runs, func(r deadRun) bool { return !r.quiet }) {
		fmt.Fprintf(w, "* the load was still at or above %.2f after %s\n", c.quietLoad, c.quietMax)
	}

	times := func(p float64, scenario string) []float64 {
		var out []float64
		for _, r := range runs {
			if r.percent == p && r.bench[scenario] != nil && r.bench[scenario]["reached"] == r.bench[scenario]["healthy"] {
				out = append(out, r.figure(scenario, "total_s"))
			}
		}
		return out
	}
	baseConverge, baseUpdate := median(times(0, "converge")), median(times(0, "update"))
	fmt.Fprintf(w, "\nhealthy Packages, median of %d run(s); ratio = time / time with none dead (goal <= %.1f)\n\n", c.repeat, goalRatio)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dead %\tconverge (s)\tratio\tupdate (s)\tratio\tgoal\t")
	var lines []string
	for _, p := range percents {
		conv, upd := median(times(p, "converge")), median(times(p, "update"))
		convRatio, updRatio := ratio(conv, baseConverge), ratio(upd, baseUpdate)
		goal := "-"
		if p > 0 {
			goal = "met"
			if convRatio == 0 || updRatio == 0 || convRatio > goalRatio || updRatio > goalRatio {
				goal = "missed"
			}
		}
		fmt.Fprintf(tw, "%g\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", p, conv, convRatio, upd, updRatio, goal)
		lines = append(lines, fmt.Sprintf("COMPARE packages=%s dead_percent=%g runs=%d converge_s=%.2f converge_ratio=%.2f update_s=%.2f update_ratio=%.2f goal=%s",
			packages, p, len(times(p, "converge")), conv, convRatio, upd, updRatio, goal))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func ratio(v, base float64) float64 {
	if base <= 0 || v <= 0 {
		return 0
	}
	return v / base
}
