package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
)

// limitGoalRatio is issue 46's goal: the controller's memory limit costs at most 1.2 times the
// time of a run without it, for the converge and for the update wave.
const limitGoalRatio = 1.2

// limitRun is one run of the fleet in a child process, with or without the memory limit.
type limitRun struct {
	limited bool
	round   int
	load    float64
	quiet   bool
	bench   map[string]map[string]string
	err     error
}

func (r limitRun) figure(scenario, key string) float64 {
	return deadRun{bench: r.bench}.figure(scenario, key)
}

// runCompareLimit runs the fleet with the controller's memory limit (-gomemlimit, or the
// Deployment's) and without one, c.repeat times, interleaved, each in a child process of this
// program with the other flags of fs, and prints the times, the controller's CPU and peak RSS,
// and the ratios of the times with the limit to those without.
func runCompareLimit(ctx context.Context, fs *flag.FlagSet, c compareOptions, o options) error {
	if c.repeat < 1 {
		return errors.New("-repeat must be at least 1")
	}
	limit := o.goMemLimit
	if limit == "" {
		var err error
		if limit, err = deploymentEnv(o.managerManifest, "GOMEMLIMIT"); err != nil {
			return err
		}
	}
	if limit == "" || limit == "off" {
		return errors.New("-compare-limit: no memory limit to compare with (-gomemlimit is off, or the Deployment sets no GOMEMLIMIT)")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run it again: %w", err)
	}
	var args []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(compareFlags, f.Name) && f.Name != "gomemlimit" {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	started := time.Now()
	var runs []limitRun
	var errs []error
	for round := 1; round <= c.repeat; round++ {
		for _, limited := range []bool{true, false} {
			r := limitRun{limited: limited, round: round}
			if r.load, r.quiet, err = waitForQuiet(ctx, c.quietLoad, c.quietMax); err != nil {
				return err
			}
			value := "off"
			if limited {
				value = limit
			}
			progress("compare: run %d of %d: GOMEMLIMIT %s, %d Packages, %s arrival (load %.2f)", len(runs)+1, 2*c.repeat, value, o.packages, o.arrival, r.load)
			r.bench, r.err = runChild(ctx, exe, append(slices.Clone(args), "-gomemlimit="+value))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.err != nil {
				errs = append(errs, fmt.Errorf("run with GOMEMLIMIT %s: %w", value, r.err))
			}
			runs = append(runs, r)
		}
	}
	printLimitComparison(os.Stdout, o, limit, c, runs, time.Since(started))
	return errors.Join(errs...)
}

// printLimitComparison prints every run, then the medians with and without the limit, their
// ratios and a COMPARE line.
func printLimitComparison(w io.Writer, o options, limit string, c compareOptions, runs []limitRun, elapsed time.Duration) {
	fmt.Fprintf(w, "\npkgsync fleet benchmark, memory limit: %d Packages, %s arrival, GOMEMLIMIT %s against none, %d run(s) each, %d CPUs, %s, took %s\n\n",
		o.packages, o.arrival, limit, c.repeat, runtime.NumCPU(), runtime.Version(), elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "GOMEMLIMIT\trun\tload 1m\tconverge (s)\tcontroller CPU s\tupdate (s)\tcontroller CPU s\tpeak RSS (MiB)\tof it file-backed\t")
	name := func(limited bool) string {
		if limited {
			return limit
		}
		return "off"
	}
	peakRSS := func(r limitRun) float64 {
		peak := 0.0
		for sc := range r.bench {
			peak = max(peak, r.figure(sc, "rss_peak_mib"))
		}
		return peak
	}
	for _, r := range runs {
		load := fmt.Sprintf("%.2f", r.load)
		if !r.quiet {
			load += "*"
		}
		if r.err != nil && r.bench["update"] == nil {
			fmt.Fprintf(tw, "%s\t%d\t%s\tfailed: %v\t\t\t\t\t\t\n", name(r.limited), r.round, load, r.err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t\n", name(r.limited), r.round, load,
			r.figure("converge", "total_s"), r.figure("converge", "cpu_s"), r.figure("update", "total_s"), r.figure("update", "cpu_s"),
			peakRSS(r), r.figure("update", "rss_file_mib"))
	}
	_ = tw.Flush()
	if slices.ContainsFunc(runs, func(r limitRun) bool { return !r.quiet }) {
		fmt.Fprintf(w, "* the load was still at or above %.2f after %s\n", c.quietLoad, c.quietMax)
	}
	medianOf := func(limited bool, scenario, key string) float64 {
		var vs []float64
		for _, r := range runs {
			if r.limited == limited && r.bench[scenario] != nil && r.bench[scenario]["reached"] == r.bench[scenario]["healthy"] {
				vs = append(vs, r.figure(scenario, key))
			}
		}
		return median(vs)
	}
	conv, convNone := medianOf(true, "converge", "total_s"), medianOf(false, "converge", "total_s")
	upd, updNone := medianOf(true, "update", "total_s"), medianOf(false, "update", "total_s")
	convRatio, updRatio := ratio(conv, convNone), ratio(upd, updNone)
	goal := "met"
	if convRatio == 0 || updRatio == 0 || convRatio > limitGoalRatio || updRatio > limitGoalRatio {
		goal = "missed"
	}
	fmt.Fprintf(w, "\nmedian of %d run(s); ratio = time with GOMEMLIMIT %s / time without (goal <= %.1f)\n\n", c.repeat, limit, limitGoalRatio)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tconverge (s)\tupdate (s)\t")
	fmt.Fprintf(tw, "GOMEMLIMIT %s\t%.2f\t%.2f\t\n", limit, conv, upd)
	fmt.Fprintf(tw, "none\t%.2f\t%.2f\t\n", convNone, updNone)
	fmt.Fprintf(tw, "ratio\t%.2f\t%.2f\t\n", convRatio, updRatio)
	_ = tw.Flush()
	fmt.Fprintf(w, "\nCOMPARE packages=%d arrival=%s gomemlimit=%s runs=%d converge_s=%.2f converge_unlimited_s=%.2f converge_ratio=%.2f update_s=%.2f update_unlimited_s=%.2f update_ratio=%.2f goal=%s\n",
		o.packages, o.arrival, limit, c.repeat, conv, convNone, convRatio, upd, updNone, updRatio, goal)
}
