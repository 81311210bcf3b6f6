// Command bench measures pkgsync's controller on a fleet of hosted-control-plane namespaces:
// convergence, a forced no-op reconcile, steady-state interval reconciles and an update wave, on
// real API servers (envtest) and a real registry process, with `pkgsync controller` as a process
// of its own (or, with -controller inline, its reconcilers in this process).
// -dead-percent makes some hosted API servers dead; -compare-dead runs the fleet with none and
// with some dead and prints the ratios; -compare-limit runs it with the controller's memory
// limit and without, and prints those ratios. `make bench` runs it after the microbenchmarks;
// docs/benchmarks.md explains the method.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/apply"
)

type options struct {
	packages, objects, hostedPlanes, workers, intervals int
	interval, timeout                                   time.Duration
	hostedClusters                                      bool
	crdDir, logFile, memProfile, cpuProfile             string
	// cpuProfiled names the scenario -cpuprofile profiles.
	cpuProfiled string
	// deadPercent of the hosted clusters have a hosted API server that never answers.
	deadPercent float64
	compare     compareOptions
	// hcpkg runs the HostedClusterPackage scenario instead of one Package per namespace.
	hcpkg bool
	// notify runs the registry-notification scenario (notify.go) instead, pushes times.
	notify bool
	pushes int
	// notifyAddr, when set, is the controller's --webhook-bind-address, and where the registry
	// sends its notifications, with notifyToken.
	notifyAddr, notifyToken string
	// controller is where the controller runs: process or inline.
	controller string
	// goMemLimit is the controller process's GOMEMLIMIT ("" for the Deployment's, in
	// managerManifest; "off" for none).
	goMemLimit, managerManifest string
	// shape is the package's shape (shapeFleet, shapeManagement, shapeBig); rawConcurrency the
	// requests in flight of the raw server-side apply the management shapes are measured against.
	shape          string
	rawConcurrency int
	// controllerArgs are more flags of `pkgsync controller` (-controller process), split on spaces.
	controllerArgs string
	// arrival is how the Packages of the converge scenario arrive: arrivalGradual or arrivalRestart.
	arrival string
	// shards is how many controller processes share the fleet (shard.go); 1 is one, unsharded.
	shards int
}

// The ways a fleet's Packages arrive at the controller in the converge scenario.
const (
	// arrivalGradual creates them while the controller runs, harnessParallelism at a time: a
	// fleet that grows, or an install of many Packages by a tool.
	arrivalGradual = "gradual"
	// arrivalRestart creates every one before the controller starts, and times the converge from
	// its start: a controller restart, or an install on an existing fleet. All of them reach the
	// work queue at once, in the order the cache lists them.
	arrivalRestart = "restart"
)

func main() {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.packages, "packages", 200, "Hosted-control-plane namespaces, one Package each")
	fs.IntVar(&o.objects, "objects", 10, "Objects per Package, half of them in hosted-cluster phases (at least 4)")
	fs.IntVar(&o.hostedPlanes, "hosted-planes", 2, "Hosted control planes the namespaces are spread over")
	fs.IntVar(&o.workers, "concurrency", 4, "Packages reconciled at once (pkgsync controller --concurrency)")
	fs.DurationVar(&o.interval, "interval", 30*time.Second, "spec.interval of every Package")
	fs.IntVar(&o.intervals, "intervals", 2, "Intervals the steady-state scenario watches")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long a scenario may take")
	fs.BoolVar(&o.hostedClusters, "hostedclusters", true, "Create a HostedCluster per namespace, as HyperShift does")
	fs.StringVar(&o.crdDir, "crds", "config/crd/bases", "pkgsync's CRDs")
	fs.StringVar(&o.logFile, "log-file", "", "Write the controller's log here (default: discard)")
	fs.StringVar(&o.memProfile, "memprofile", "", "Write a heap profile here after the last scenario")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "Write a CPU profile of the controller here, taken over the first 30 s of the -cpuprofile-scenario")
	fs.StringVar(&o.cpuProfiled, "cpuprofile-scenario", "converge", "The scenario -cpuprofile profiles: converge, noop or update")
	fs.Float64Var(&o.deadPercent, "dead-percent", 0, "Percent of the hosted clusters whose API server accepts connections and never answers (at least one when above 0)")
	fs.BoolVar(&o.hcpkg, "hcpkg", false, "Measure one HostedClusterPackage over -packages HostedClusters in 4 partitions instead: converge, then a rollout of a new digest with maxUnavailable 10%")
	fs.BoolVar(&o.notify, "notify", false, "Measure registry notifications instead: -packages Packages and a HostedClusterPackage of as many members (maxUnavailable 100%) following one tag with interval 10m; -pushes pushes answered by the registry's notifications, beside the same pushes answered by requestedAt")
	fs.IntVar(&o.pushes, "pushes", 5, "Pushes the -notify scenario times, per path")
	fs.StringVar(&o.controller, "controller", "process", "Where the controller runs: process (`pkgsync controller` built from ./cmd/pkgsync, as a user runs it; its memory and CPU are its own) or inline (its reconcilers in this process)")
	fs.StringVar(&o.goMemLimit, "gomemlimit", "", "GOMEMLIMIT of the controller process (default: the value config/manager's Deployment sets; off: none)")
	fs.StringVar(&o.managerManifest, "manager", "config/manager/manager.yaml", "The controller Deployment, whose GOMEMLIMIT the controller process runs with")
	fs.StringVar(&o.shape, "shape", shapeFleet, "The package: fleet (half of the objects on the hosted cluster), management (three phases, management cluster only), big (one phase, management cluster only; with -packages 1 -objects 8000 the one-big-package scenario). The management shapes first time a raw server-side apply of the same objects (ratio_to_raw)")
	fs.StringVar(&o.controllerArgs, "controller-args", "", "More flags for `pkgsync controller` (-controller process), separated by spaces: \"--kube-api-qps=500 --apply-concurrency-per-package=16\"")
	fs.StringVar(&o.arrival, "arrival", arrivalGradual, "How the converge scenario's Packages arrive: gradual (created while the controller runs, 16 at a time) or restart (all created before the controller starts; timed from its start)")
	fs.IntVar(&o.shards, "shards", 1, "Controller processes sharing the Packages (-controller process): each runs with --watch-label-selector "+shardLabel+"=<i>, and the Packages are labelled round robin; the report sums their CPU and requests and shows the largest peak RSS, and each shard's memory and CPU are printed")
	fs.IntVar(&o.rawConcurrency, "raw-concurrency", apply.DefaultConcurrency, "Requests in flight of the raw server-side apply (one client); the default is pkgsync's --apply-concurrency-per-package")
	o.compare.applyFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if o.objects < 4 || o.packages < 1 || o.hostedPlanes < 1 || o.intervals < 1 {
		fmt.Fprintln(os.Stderr, "bench: -objects must be at least 4; -packages, -hosted-planes and -intervals at least 1")
		os.Exit(2)
	}
	if o.shape != shapeFleet && o.shape != shapeManagement && o.shape != shapeBig {
		fmt.Fprintln(os.Stderr, "bench: -shape must be fleet, management or big")
		os.Exit(2)
	}
	if o.cpuProfiled != "converge" && o.cpuProfiled != "noop" && o.cpuProfiled != "update" {
		fmt.Fprintln(os.Stderr, "bench: -cpuprofile-scenario must be converge, noop or update")
		os.Exit(2)
	}
	if o.arrival != arrivalGradual && o.arrival != arrivalRestart {
		fmt.Fprintln(os.Stderr, "bench: -arrival must be gradual or restart")
		os.Exit(2)
	}
	if o.arrival == arrivalRestart && (o.controller != "process" || o.hcpkg || o.notify || o.compare.percents != "") {
		fmt.Fprintln(os.Stderr, "bench: -arrival restart measures the Package fleet with -controller process (a process's counters start at zero)")
		os.Exit(2)
	}
	if o.shards < 1 || o.shards > 1 && (o.controller != "process" || o.hcpkg || o.notify || o.compare.percents != "") {
		fmt.Fprintln(os.Stderr, "bench: -shards must be at least 1; above 1 it measures the Package fleet with -controller process")
		os.Exit(2)
	}
	if err := controllerMode(o.controller); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.compare.limit && (o.compare.percents != "" || o.hcpkg || o.notify || o.controller != "process") {
		fmt.Fprintln(os.Stderr, "bench: -compare-limit compares the Package fleet's controller process with and without its memory limit: not with -compare-dead, -hcpkg, -notify or -controller inline")
		os.Exit(2)
	}
	if o.deadPercent < 0 || o.deadPercent >= 100 {
		fmt.Fprintln(os.Stderr, "bench: -dead-percent must be at least 0 and below 100")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.notify {
		if err := runNotify(ctx, o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if o.hcpkg {
		if err := runHostedClusterPackage(ctx, o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if o.compare.limit {
		if err := runCompareLimit(ctx, fs, o.compare, o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if o.compare.percents != "" {
		if err := runCompare(ctx, fs, o.compare); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	progress("starting 1 management and %d hosted control planes and a registry", o.hostedPlanes)
	env, err := startEnvironment(ctx, o)
	defer env.stop()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	progress("creating %d hosted-control-plane namespaces with connector Secrets (%d with a dead hosted API server)", o.packages, deadCount(o.packages, o.deadPercent))
	f, err := setUpFleet(ctx, env, o)
	if err != nil {
		return err
	}
	healthy, dead := f.packages(false), f.packages(true)
	v1, err := f.push(ctx, "v1")
	if err != nil {
		return err
	}
	// With -arrival restart every Package exists before the controller starts; the converge
	// runs from the controller's start, its counters from before it.
	var restart *restartArrival
	if o.arrival == arrivalRestart {
		if restart, err = createBeforeController(ctx, env, f); err != nil {
			return err
		}
	}

	stopped, err := env.startController(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		<-stopped
	}()
	if restart != nil {
		restart.started(env.ctl, f.namespaces)
	}
	t, err := newTracker(ctx, env)
	if err != nil {
		return err
	}
	deadT, err := newTracker(ctx, env)
	if err != nil {
		return err
	}
	s := sampler{ctl: env.ctl}
	go s.run(ctx, sampleEvery)

	var results []*result
	var errs []error
	scenario := func(name string, body func(r *result) error) {
		r := &result{name: name, packages: o.packages, healthy: len(healthy), dead: len(dead), objects: o.objects}
		s.reset(ctx)
		before, err := env.snapshot(ctx)
		if name == "converge" && restart != nil {
			before = restart.before
		}
		if err == nil {
			err = body(r)
		}
		after, snapErr := env.snapshot(ctx)
		r.mem = s.read(ctx)
		r.between(before, after)
		results = append(results, r)
		if err = errors.Join(err, snapErr); err != nil {
			errs = append(errs, err)
		}
		progress("%s: %s", name, r.summary())
		if sharded, ok := env.ctl.(*shardedController); ok {
			sharded.perShard(ctx, name)
		}
	}

	var raw *rawLimit
	if o.shape != shapeFleet {
		progress("raw: server-side apply of the same %d objects, one client, %d in flight", o.packages*o.objects, o.rawConcurrency)
		r, err := measureRaw(ctx, env.mgmt.Config, env.admin, o.packages, o.rawConcurrency, func(ns string) []*unstructured.Unstructured {
			return managementObjects(ns, o.objects, "v1")
		})
		if err != nil {
			return err
		}
		raw = &r
		progress("raw: %d objects in %.2fs (%.0f/s), management API server %.2f CPU s", r.objects, r.duration.Seconds(), float64(r.objects)/r.duration.Seconds(), r.cpu)
	}

	if restart == nil {
		progress("converge: creating %d Packages of %s (%d objects each)", o.packages, f.image, o.objects)
	}
	var profiled chan error // the CPU profile of the -cpuprofile-scenario, written meanwhile
	profile := func(name string) {
		if o.cpuProfile != "" && o.cpuProfiled == name {
			profiled = make(chan error, 1)
			go func() { profiled <- writeCPUProfile(ctx, env.ctl, o.cpuProfile, 30*time.Second) }()
		}
	}
	scenario("converge", func(r *result) error {
		r.raw = raw
		done := t.expect(healthy, readyOn(v1, ""))
		deadDone := deadT.expect(dead, unavailable(""))
		profile("converge")
		if restart != nil {
			return errors.Join(r.waitFor(ctx, t, done, restart.start, restart.created, o.timeout), r.waitForDead(ctx, deadT, deadDone, restart.start, o.timeout))
		}
		start := time.Now()
		created, err := f.createPackages(ctx)
		if err != nil {
			return err
		}
		return errors.Join(r.waitFor(ctx, t, done, start, created, o.timeout), r.waitForDead(ctx, deadT, deadDone, start, o.timeout))
	})

	progress("noop: requesting a reconcile of every Package, nothing changed")
	scenario("noop", func(r *result) error {
		profile("noop")
		token := time.Now().Format(time.RFC3339Nano)
		done := t.expect(healthy, readyOn(v1, token))
		deadDone := deadT.expect(dead, unavailable(token))
		start := time.Now()
		requested, err := f.requestReconcile(ctx, token)
		if err != nil {
			return err
		}
		return errors.Join(r.waitFor(ctx, t, done, start, requested, o.timeout), r.waitForDead(ctx, deadT, deadDone, start, o.timeout))
	})

	progress("steady: watching %d intervals of %s", o.intervals, o.interval)
	scenario("steady", func(r *result) error {
		window := time.Duration(o.intervals) * o.interval
		start := time.Now()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(window):
		}
		r.duration = time.Since(start)
		r.reached = len(healthy)
		return nil
	})

	progress("update: pushing v2 to the shared tag and requesting a reconcile of every Package")
	scenario("update", func(r *result) error {
		profile("update")
		start := time.Now()
		v2, err := f.push(ctx, "v2")
		if err != nil {
			return err
		}
		token := time.Now().Format(time.RFC3339Nano)
		done := t.expect(healthy, readyOn(v2, token))
		deadDone := deadT.expect(dead, unavailable(token))
		requested, err := f.requestReconcile(ctx, token)
		if err != nil {
			return err
		}
		return errors.Join(r.waitFor(ctx, t, done, start, requested, o.timeout), r.waitForDead(ctx, deadT, deadDone, start, o.timeout))
	})

	printReport(os.Stdout, o, results, time.Since(started))
	if profiled != nil {
		errs = append(errs, <-profiled)
	}
	if o.memProfile != "" {
		errs = append(errs, writeHeapProfile(ctx, env.ctl, o.memProfile))
	}
	return errors.Join(errs...)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
