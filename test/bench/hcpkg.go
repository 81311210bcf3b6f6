package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// partitionLabel and partitions are how the fleet benchmark splits the HostedClusters: four
// partitions, round-robin.
const (
	partitionLabel = "bench.pkgsync.dev/wave"
	partitionCount = 4
	fleetName      = "bench"
)

// fleetRun is what the HostedClusterPackage scenario measured.
type fleetRun struct {
	converge, rollout time.Duration
	// partitions maps a partition to how long it took, from the rollout's start or the end of
	// the previous partition to its end.
	partitions map[string]time.Duration
	order      []string
	// registry requests and management writes during each phase.
	convergeRegistry, rolloutRegistry counts
	convergeWrites, rolloutWrites     int
	// convergeMemberWrites and rolloutMemberWrites are writes of member Packages (spec, not status).
	convergeMemberWrites, rolloutMemberWrites int
	convergeCPU, rolloutCPU                   float64
	mem                                       memory
}

// runHostedClusterPackage measures one HostedClusterPackage over -packages HostedClusters:
// converge (every member created and Ready), then the rollout of a new digest with
// maxUnavailable 10 % over four partitions.
func runHostedClusterPackage(ctx context.Context, o options) error {
	o.hostedClusters = true
	progress("starting 1 management and %d hosted control planes and a registry", o.hostedPlanes)
	env, err := startEnvironment(ctx, o)
	defer env.stop()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped, err := env.startController(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		<-stopped
	}()
	s := sampler{ctl: env.ctl}
	go s.run(ctx, sampleEvery)

	progress("creating %d HostedClusters in %d partitions with their namespaces and connector Secrets", o.packages, partitionCount)
	f, err := setUpFleet(ctx, env, o)
	if err != nil {
		return err
	}
	if err := parallel(ctx, o.packages, func(ctx context.Context, i int) error {
		hc := &unstructured.Unstructured{}
		hc.SetGroupVersionKind(hosted.HostedClusterGVK)
		hc.SetNamespace(hostedClusterNamespace)
		hc.SetName(hostedClusterName(i))
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"wave-%d"}}}`, partitionLabel, i%partitionCount)
		return env.admin.Patch(ctx, hc, client.RawPatch("application/merge-patch+json", patch))
	}); err != nil {
		return fmt.Errorf("label HostedClusters: %w", err)
	}
	v1, err := f.push(ctx, "v1")
	if err != nil {
		return err
	}
	tenPercent := intstr.FromString("10%")
	fleetObj := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName},
		Spec: v1alpha1.HostedClusterPackageSpec{
			Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: f.image, Interval: &metav1.Duration{Duration: time.Hour}}},
			Rollout: v1alpha1.FleetRolloutStrategy{
				MaxUnavailable: &tenPercent,
				Partitions:     &v1alpha1.FleetPartitions{LabelKey: partitionLabel},
			},
		},
	}
	run := &fleetRun{partitions: map[string]time.Duration{}}

	progress("converge: one HostedClusterPackage of %s over %d HostedClusters", f.image, o.packages)
	before, err := env.snapshot(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := env.admin.Create(ctx, fleetObj); err != nil {
		return fmt.Errorf("create HostedClusterPackage: %w", err)
	}
	if _, err := waitForFleetOn(ctx, env.admin, v1, o.timeout, nil); err != nil {
		return fmt.Errorf("converge: %w", err)
	}
	run.converge = time.Since(start)
	after, err := env.snapshot(ctx)
	if err != nil {
		return err
	}
	run.convergeRegistry = after.registry.minus(before.registry)
	run.convergeWrites = after.mgmt.minus(before.mgmt).sum(writeVerbs, managedResource)
	run.convergeMemberWrites = after.mgmt.minus(before.mgmt).sum(writeVerbs, isPackages)
	run.convergeCPU = after.cpu - before.cpu
	progress("converge: %s", run.converge.Round(time.Millisecond))

	progress("rollout: pushing v2 to the shared tag and requesting a reconcile of the HostedClusterPackage")
	before = after
	s.reset(ctx)
	start = time.Now()
	v2, err := f.push(ctx, "v2")
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
	if err := env.admin.Patch(ctx, fleetObj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("request reconcile: %w", err)
	}
	finished := map[string]time.Time{}
	if _, err := waitForFleetOn(ctx, env.admin, v2, o.timeout, func(f *v1alpha1.HostedClusterPackage) {
		if f.Status.Target == nil || f.Status.Target.Digest != v2 {
			return
		}
		for _, p := range f.Status.Partitions {
			if _, done := finished[p.Name]; !done && p.State == v1alpha1.PartitionComplete {
				finished[p.Name] = time.Now()
				run.order = append(run.order, p.Name)
			}
		}
	}); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	run.rollout = time.Since(start)
	after, err = env.snapshot(ctx)
	if err != nil {
		return err
	}
	run.mem = s.read(ctx)
	run.rolloutRegistry = after.registry.minus(before.registry)
	run.rolloutWrites = after.mgmt.minus(before.mgmt).sum(writeVerbs, managedResource)
	run.rolloutMemberWrites = after.mgmt.minus(before.mgmt).sum(writeVerbs, isPackages)
	run.rolloutCPU = after.cpu - before.cpu
	previous := start
	for _, name := range run.order {
		run.partitions[name] = finished[name].Sub(previous)
		previous = finished[name]
	}
	printFleetReport(os.Stdout, o, run)
	return nil
}

// waitForFleetOn polls the fleet until it is Ready with every member on digest, calling observe
// with each status read.
func waitForFleetOn(ctx context.Context, c client.Client, digest string, timeout time.Duration, observe func(*v1alpha1.HostedClusterPackage)) (*v1alpha1.HostedClusterPackage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	f := &v1alpha1.HostedClusterPackage{}
	for {
		if err := c.Get(ctx, client.ObjectKey{Name: fleetName}, f); err == nil {
			if observe != nil {
				observe(f)
			}
			if conditions.IsReady(f) && f.Status.ObservedGeneration == f.Generation && f.Status.Stable != nil && f.Status.Stable.Digest == digest {
				return f, nil
			}
		}
		select {
		case <-ctx.Done():
			msg := conditions.GetMessage(f, meta.ReadyCondition)
			return nil, errors.Join(ctx.Err(), fmt.Errorf("fleet not Ready on %s: %s (%s)", digest, msg, f.Status.Progress))
		case <-tick.C:
		}
	}
}

func printFleetReport(w io.Writer, o options, r *fleetRun) {
	fmt.Fprintf(w, "\nHostedClusterPackage over %d HostedClusters (%d objects each, half hosted), %d partitions, maxUnavailable 10%%, %d workers\n\n",
		o.packages, o.objects, partitionCount, o.workers)
	fmt.Fprintf(w, "%-10s %10s %8s %-40s %14s %18s\n", "scenario", "duration", "cpu(s)", "registry requests", "Package writes", "object writes/member")
	fmt.Fprintf(w, "%-10s %10s %8.1f %-40s %14d %18.1f\n", "converge", r.converge.Round(time.Millisecond), r.convergeCPU, r.convergeRegistry, r.convergeMemberWrites, float64(r.convergeWrites)/float64(o.packages))
	fmt.Fprintf(w, "%-10s %10s %8.1f %-40s %14d %18.1f\n", "rollout", r.rollout.Round(time.Millisecond), r.rolloutCPU, r.rolloutRegistry, r.rolloutMemberWrites, float64(r.rolloutWrites)/float64(o.packages))
	fmt.Fprintln(w, "\npartition  time")
	names := slices.Clone(r.order)
	for _, name := range names {
		fmt.Fprintf(w, "%-10s %s\n", name, r.partitions[name].Round(time.Millisecond))
	}
	who := "the controller"
	if o.controller == "inline" {
		who = "the bench process (controller and harness)"
	}
	fmt.Fprintf(w, "\n%s during the rollout: peak heap %.0f MiB (sampled every %s), live heap %.0f MiB, peak RSS %.0f MiB, peak goroutines %d\n",
		who, float64(r.mem.PeakHeap)/(1<<20), sampleEvery, float64(r.mem.LiveHeap)/(1<<20), float64(r.mem.PeakRSS)/(1<<20), r.mem.PeakGoroutines)
}

// isPackages keeps the member Packages' own writes (create, update; not their status).
func isPackages(resource string) bool { return resource == "packages" }
