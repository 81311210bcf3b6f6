package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

const (
	// notifySecret is the controller's --webhook-secret in the notification scenario.
	notifySecret = "default/pkgsync-webhook"
	// notifyFleetLabel selects the HostedClusters of the fleet's members.
	notifyFleetLabel = "bench.pkgsync.dev/fleet"
)

// pushRun is what one path (notifications or requestedAt) measured over its pushes.
type pushRun struct {
	name string
	// latencies are per push, from the push's completion to every Package and member Ready on
	// the new digest.
	latencies []time.Duration
	// heads and requests are the registry requests of each push (HEAD of the manifest, all).
	heads, requests []int
}

// runNotify measures a push answered by the registry's notifications beside one answered by
// requestedAt: -packages Packages and a HostedClusterPackage of as many members
// (maxUnavailable 100 %) follow one tag with interval 10m, so that no interval reconcile
// happens within the run. Each path runs on an environment of its own: the registry of the
// notification path notifies the controller, the other's notifies nobody (a registry retries
// a refused notification until it is taken, so one registry cannot serve both paths).
func runNotify(ctx context.Context, o options) error {
	if o.controller != "process" {
		return fmt.Errorf("-notify runs the controller as a process (-controller process)")
	}
	o.hostedClusters, o.interval = true, 10*time.Minute
	requested, err := runPushes(ctx, o, false)
	if err != nil {
		return fmt.Errorf("requestedAt: %w", err)
	}
	if o.notifyAddr, err = freeAddress(); err != nil {
		return err
	}
	o.notifyToken = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	notified, err := runPushes(ctx, o, true)
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	printNotifyReport(os.Stdout, o, []*pushRun{notified, requested})
	return nil
}

// runPushes starts an environment, converges the Packages and the fleet on v1, then pushes
// o.pushes new digests, each answered by the registry's notification (notify) or by
// requestedAt on every Package and the fleet.
func runPushes(ctx context.Context, o options, notify bool) (*pushRun, error) {
	run := &pushRun{name: "requestedAt"}
	if notify {
		run.name = "notification"
	}
	progress("%s: starting 1 management and %d hosted control planes and a registry", run.name, o.hostedPlanes)
	env, err := startEnvironment(ctx, o)
	defer env.stop()
	if err != nil {
		return nil, err
	}
	if notify {
		ns, name, _ := strings.Cut(notifySecret, "/")
		if err := env.admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{"distribution": []byte(o.notifyToken)}}); err != nil {
			return nil, fmt.Errorf("create webhook Secret: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped, err := env.startController(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		cancel()
		<-stopped
	}()
	t, err := newTracker(ctx, env)
	if err != nil {
		return nil, err
	}
	// The Packages and the fleet's members apply the same objects: they get namespaces (and
	// HostedClusters) of their own, the fleet selecting its half by label.
	doubled := o
	doubled.packages = 2 * o.packages
	f, err := setUpFleet(ctx, env, doubled)
	if err != nil {
		return nil, err
	}
	memberNamespaces := f.namespaces[o.packages:]
	f.namespaces = f.namespaces[:o.packages]
	if err := parallel(ctx, o.packages, func(ctx context.Context, i int) error {
		hc := &unstructured.Unstructured{}
		hc.SetGroupVersionKind(hosted.HostedClusterGVK)
		hc.SetNamespace(hostedClusterNamespace)
		hc.SetName(hostedClusterName(o.packages + i))
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"yes"}}}`, notifyFleetLabel)
		return env.admin.Patch(ctx, hc, client.RawPatch("application/merge-patch+json", patch))
	}); err != nil {
		return nil, fmt.Errorf("label HostedClusters: %w", err)
	}
	all := map[string]bool{}
	for _, ns := range f.namespaces {
		all[ns+"/"+packageName] = true
	}
	for _, ns := range memberNamespaces {
		all[ns+"/"+fleetName] = true
	}
	v1, err := f.push(ctx, "v1")
	if err != nil {
		return nil, err
	}
	if notify {
		// The receiver answers before anything is timed.
		if err := waitForReceiver(ctx, o); err != nil {
			return nil, err
		}
	}
	hundred := intstr.FromString("100%")
	fleetObj := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{notifyFleetLabel: "yes"}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: f.image, Interval: &metav1.Duration{Duration: o.interval}}},
			Rollout:               v1alpha1.FleetRolloutStrategy{MaxUnavailable: &hundred},
		},
	}
	progress("%s: converging %d Packages and a fleet of %d members on v1", run.name, o.packages, o.packages)
	done := t.expect(all, readyOn(v1, ""))
	if _, err := f.createPackages(ctx); err != nil {
		return nil, err
	}
	if err := env.admin.Create(ctx, fleetObj); err != nil {
		return nil, fmt.Errorf("create HostedClusterPackage: %w", err)
	}
	if err := waitDone(ctx, done, o.timeout); err != nil {
		return nil, fmt.Errorf("converge: %w", err)
	}
	if _, err := waitForFleetOn(ctx, env.admin, v1, o.timeout, nil); err != nil {
		return nil, fmt.Errorf("converge: %w", err)
	}

	for i := range o.pushes {
		before := env.proxy.snapshot()
		revision := fmt.Sprintf("%s-%d", run.name, i+1)
		digest, err := f.push(ctx, revision)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		done := t.expect(all, readyOn(digest, ""))
		if !notify {
			token := time.Now().Format(time.RFC3339Nano)
			if _, err := f.requestReconcile(ctx, token); err != nil {
				return nil, err
			}
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token)
			if err := env.admin.Patch(ctx, fleetObj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
				return nil, fmt.Errorf("request reconcile of the fleet: %w", err)
			}
		}
		if err := waitDone(ctx, done, o.timeout); err != nil {
			return nil, fmt.Errorf("push %d: %w", i+1, err)
		}
		run.latencies = append(run.latencies, time.Since(start))
		if _, err := waitForFleetOn(ctx, env.admin, digest, o.timeout, nil); err != nil {
			return nil, fmt.Errorf("push %d: %w", i+1, err)
		}
		used := env.proxy.snapshot().minus(before)
		run.heads = append(run.heads, used["HEAD manifests"])
		total := 0
		for _, n := range used {
			total += n
		}
		run.requests = append(run.requests, total)
		progress("%s: push %d: %s, registry %s", run.name, i+1, run.latencies[i].Round(time.Millisecond), used)
	}
	return run, nil
}

// waitForReceiver posts an empty Distribution envelope until the controller's receiver takes it
// (it listens once the controller leads and has read the Secret).
func waitForReceiver(ctx context.Context, o options) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+o.notifyAddr+"/hooks/distribution", strings.NewReader(`{"events":[]}`))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+o.notifyToken)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the controller's receiver did not answer: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitDone(ctx context.Context, done <-chan struct{}, timeout time.Duration) error {
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("not every Package Ready within %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func printNotifyReport(w io.Writer, o options, runs []*pushRun) {
	fmt.Fprintf(w, "\n%d Packages and a HostedClusterPackage of %d members (maxUnavailable 100%%) on one tag, interval 10m, %d objects each, %d workers; %d pushes per path\n\n",
		o.packages, o.packages, o.objects, o.workers, o.pushes)
	fmt.Fprintf(w, "%-13s %10s %10s %14s %22s\n", "path", "p50", "max", "HEAD/push", "registry requests/push")
	for _, r := range runs {
		sorted := slices.Clone(r.latencies)
		slices.Sort(sorted)
		fmt.Fprintf(w, "%-13s %10s %10s %14s %22s\n", r.name, sorted[(len(sorted)-1)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond),
			fmt.Sprint(r.heads), fmt.Sprint(r.requests))
	}
	for _, r := range runs {
		sorted := slices.Clone(r.latencies)
		slices.Sort(sorted)
		fmt.Fprintf(w, "BENCH scenario=push-%s packages=%d members=%d pushes=%d p50_s=%.2f max_s=%.2f heads=%v requests=%v\n", r.name, o.packages, o.packages, o.pushes,
			sorted[(len(sorted)-1)/2].Seconds(), sorted[len(sorted)-1].Seconds(), r.heads, r.requests)
	}
}
