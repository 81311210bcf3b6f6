package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// figures are the numbers of one scenario, in the order of the BENCH line.
type figures struct {
	keys   []string
	values map[string]string
}

func (f *figures) add(key, format string, v any) {
	f.keys = append(f.keys, key)
	f.values[key] = fmt.Sprintf(format, v)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func isStatus(resource string) bool { return strings.HasSuffix(resource, "/status") }
func isEvent(resource string) bool  { return resource == "events" }
func isPackage(resource string) bool {
	return resource == "packages"
}

func (r *result) figures() *figures {
	f := &figures{values: map[string]string{}}
	f.add("scenario", "%s", r.name)
	f.add("packages", "%d", r.packages)
	f.add("healthy", "%d", r.healthy)
	f.add("dead", "%d", r.dead)
	f.add("objects", "%d", r.objects)
	f.add("reached", "%d", r.reached)
	f.add("total_s", "%.2f", r.duration.Seconds())
	f.add("p50_s", "%.2f", percentile(r.latencies, 50).Seconds())
	f.add("p90_s", "%.2f", percentile(r.latencies, 90).Seconds())
	f.add("max_s", "%.2f", percentile(r.latencies, 100).Seconds())
	objs := float64(r.healthy * r.objects)
	perSecond := 0.0
	if r.duration > 0 && r.name != "steady" {
		perSecond = objs / r.duration.Seconds()
	}
	f.add("objects_per_s", "%.0f", perSecond)
	f.add("reconciles", "%d", r.reconciles)
	f.add("reconciles_over_5s", "%d", r.slowReconciles)
	f.add("slowest_reconcile_le_s", "%g", r.slowestReconcile)
	perReconcile := 0.0
	if r.reconciles > 0 {
		perReconcile = r.cpu / float64(r.reconciles)
	}
	f.add("cpu_s", "%.2f", r.cpu)
	f.add("cpu_ms_per_reconcile", "%.2f", perReconcile*1000)
	f.add("harness_cpu_s", "%.2f", r.harnessCPU)
	for _, role := range []string{"apiserver_mgmt", "apiserver_hosted", "etcd", "registry"} {
		f.add(role+"_cpu_s", "%.2f", r.serverCPU[role])
	}

	if r.raw != nil && r.raw.duration > 0 {
		f.add("raw_s", "%.2f", r.raw.duration.Seconds())
		f.add("raw_objects_per_s", "%.0f", float64(r.raw.objects)/r.raw.duration.Seconds())
		f.add("raw_apiserver_mgmt_cpu_s", "%.2f", r.raw.cpu)
		f.add("ratio_to_raw", "%.1f", r.duration.Seconds()/r.raw.duration.Seconds())
	}
	if r.packages > 0 {
		perPackage := func(verbs ...string) float64 { return float64(r.mgmt.sum(verbs, nil)) / float64(r.packages) }
		f.add("mgmt_requests_per_package", "%.1f", perPackage(slices.Concat(readVerbs, writeVerbs)...))
		for _, verb := range []string{"GET", "LIST", "PATCH", "APPLY", "POST", "PUT", "DELETE"} {
			f.add("mgmt_"+strings.ToLower(verb)+"_per_package", "%.1f", perPackage(verb))
		}
		f.add("apiserver_mgmt_cpu_s_per_package", "%.3f", r.serverCPU["apiserver_mgmt"]/float64(r.packages))
	}
	f.add("mgmt_writes", "%d", r.mgmt.sum(writeVerbs, nil))
	f.add("mgmt_object_writes", "%d", r.mgmt.sum(writeVerbs, managedResource))
	f.add("mgmt_status_writes", "%d", r.mgmt.sum(writeVerbs, isStatus))
	f.add("mgmt_package_writes", "%d", r.mgmt.sum(writeVerbs, isPackage))
	f.add("mgmt_event_writes", "%d", r.mgmt.sum(writeVerbs, isEvent))
	f.add("mgmt_reads", "%d", r.mgmt.sum(readVerbs, nil))
	f.add("mgmt_object_reads", "%d", r.mgmt.sum(readVerbs, managedResource))
	f.add("hosted_writes", "%d", r.hosted.sum(writeVerbs, managedResource))
	f.add("hosted_reads", "%d", r.hosted.sum(readVerbs, managedResource))
	objectReads := r.mgmt.sum(readVerbs, managedResource) + r.hosted.sum(readVerbs, managedResource)
	readsPerObject := 0.0
	if r.reconciles > 0 {
		readsPerObject = float64(objectReads) / (float64(r.reconciles) * float64(r.objects))
	}
	f.add("reads_per_object_reconcile", "%.2f", readsPerObject)
	if r.hostedCachedOnly {
		f.add("hosted_clients_cached", "%d", r.hostedClients)
	} else {
		f.add("hosted_clients_built", "%d", r.hostedClients)
	}

	f.add("registry_requests", "%d", r.registry.sum([]string{"HEAD", "GET", "POST", "PUT", "PATCH", "DELETE"}, nil))
	f.add("registry_head", "%d", r.registry["HEAD manifests"])
	f.add("registry_manifest_get", "%d", r.registry["GET manifests"])
	f.add("registry_blob_get", "%d", r.registry["GET blobs"])

	f.add("dead_unavailable", "%d", r.deadReached)
	f.add("dead_unavailable_s", "%.2f", r.deadDuration.Seconds())
	f.add("probes", "%d", r.probes)
	f.add("dead_connections", "%d", r.deadConnections)

	f.add("heap_peak_mib", "%.1f", mib(r.mem.PeakHeap))
	f.add("heap_live_mib", "%.1f", mib(r.mem.LiveHeap))
	f.add("rss_peak_mib", "%.1f", mib(r.mem.PeakRSS))
	f.add("rss_file_mib", "%.1f", mib(r.mem.FileRSS))
	f.add("goroutines_peak", "%d", r.mem.PeakGoroutines)
	f.add("harness_rss_peak_mib", "%.1f", mib(r.mem.HarnessPeakRSS))
	return f
}

// summary is the one-line progress message of a scenario.
func (r *result) summary() string {
	f := r.figures()
	s := fmt.Sprintf("%s/%d Ready in %ss, %s reconciles, %s mgmt writes, %s hosted writes, %s registry requests",
		f.values["reached"], r.healthy, f.values["total_s"], f.values["reconciles"], f.values["mgmt_writes"],
		f.values["hosted_writes"], f.values["registry_requests"])
	if r.dead > 0 {
		s += fmt.Sprintf("; dead: %s/%d %s by %ss, %s probes, %s connections to dead servers, %s reconciles over 5s (slowest <= %ss)",
			f.values["dead_unavailable"], r.dead, v1alpha1.HostedClusterUnavailableReason, f.values["dead_unavailable_s"],
			f.values["probes"], f.values["dead_connections"], f.values["reconciles_over_5s"], f.values["slowest_reconcile_le_s"])
	}
	return s
}

func printReport(w io.Writer, o options, results []*result, elapsed time.Duration) {
	dead := ""
	if n := deadCount(o.packages, o.deadPercent); n > 0 {
		dead = fmt.Sprintf(", %d of them (%g %%) with a dead hosted API server", n, o.deadPercent)
	}
	fmt.Fprintf(w, "\npkgsync fleet benchmark: %d Packages x %d objects (%d hosted)%s, %d hosted control planes, "+
		"controller %s, Packages arriving %s, concurrency %d, interval %s, %d CPUs, %s, run took %s\n\n",
		o.packages, o.objects, o.objects/2, dead, o.hostedPlanes, o.controller, o.arrival, o.workers, o.interval, runtime.NumCPU(), runtime.Version(), elapsed.Round(time.Second))
	rows := []struct{ label, key string }{
		{"Packages at goal", "reached"},
		{"wall time (s)", "total_s"},
		{"per Package p50 / p90 / max (s)", "p50_s p90_s max_s"},
		{"objects/s", "objects_per_s"},
		{"reconciles", "reconciles"},
		{"controller CPU s / ms per reconcile", "cpu_s cpu_ms_per_reconcile"},
		{"raw SSA of the same objects (s) / objects/s", "raw_s raw_objects_per_s"},
		{"wall time / raw SSA", "ratio_to_raw"},
		{"mgmt requests per Package: all", "mgmt_requests_per_package"},
		{"  GET / LIST / PATCH / APPLY / POST / PUT / DELETE", "mgmt_get_per_package mgmt_list_per_package mgmt_patch_per_package mgmt_apply_per_package mgmt_post_per_package mgmt_put_per_package mgmt_delete_per_package"},
		{"mgmt API server CPU s per Package (raw SSA, all)", "apiserver_mgmt_cpu_s_per_package raw_apiserver_mgmt_cpu_s"},
		{"mgmt writes: all", "mgmt_writes"},
		{"  objects / status / Package / events", "mgmt_object_writes mgmt_status_writes mgmt_package_writes mgmt_event_writes"},
		{"mgmt reads: all / objects", "mgmt_reads mgmt_object_reads"},
		{"hosted writes / reads (objects)", "hosted_writes hosted_reads"},
		{"object reads per object per reconcile", "reads_per_object_reconcile"},
		{"hosted clients built (inline) or cached (process)", "hosted_clients_built hosted_clients_cached"},
		{"reconciles over 5 s / slowest at most (s)", "reconciles_over_5s slowest_reconcile_le_s"},
		{"registry: all / HEAD / GET manifest / GET blob", "registry_requests registry_head registry_manifest_get registry_blob_get"},
		{"controller heap peak / live (MiB)", "heap_peak_mib heap_live_mib"},
		{"controller peak RSS (MiB)", "rss_peak_mib"},
		{"controller goroutines peak", "goroutines_peak"},
		{"harness CPU s / peak RSS (MiB)", "harness_cpu_s harness_rss_peak_mib"},
		{"CPU s: mgmt / hosted API servers / etcd / registry", "apiserver_mgmt_cpu_s apiserver_hosted_cpu_s etcd_cpu_s registry_cpu_s"},
	}
	if deadCount(o.packages, o.deadPercent) > 0 {
		rows[0].label = "healthy Packages at goal"
		rows = append(rows[:2], append([]struct{ label, key string }{
			{"dead at HostedClusterUnavailable / by (s)", "dead_unavailable dead_unavailable_s"},
			{"probes / connections to dead servers", "probes dead_connections"},
		}, rows[2:]...)...)
	}
	figs := make([]*figures, len(results))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for i, r := range results {
		figs[i] = r.figures()
		fmt.Fprintf(tw, "%s\t", r.name)
	}
	fmt.Fprintln(tw)
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t", row.label)
		for _, f := range figs {
			var vals []string
			for _, k := range strings.Fields(row.key) {
				if v, ok := f.values[k]; ok {
					vals = append(vals, v)
				}
			}
			fmt.Fprintf(tw, "%s\t", strings.Join(vals, " / "))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintf(w, "requests %s: mgmt{%s} hosted{%s} registry{%s}\n", r.name, r.mgmt, r.hosted, r.registry)
	}
	fmt.Fprintln(w)
	for _, f := range figs {
		parts := make([]string, 0, len(f.keys))
		for _, k := range f.keys {
			parts = append(parts, k+"="+f.values[k])
		}
		fmt.Fprintln(w, "BENCH "+strings.Join(parts, " "))
	}
}
