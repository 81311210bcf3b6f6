package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	// hostedClusterNamespace holds the HostedClusters, as "clusters" does in HyperShift's docs.
	hostedClusterNamespace = "clusters"
	packageName            = "fleet"
	repository             = "bench/fleet"
	tag                    = "stable"
	// harnessParallelism is how many requests the harness itself sends at once.
	harnessParallelism = 16
)

// fleet is N hosted-control-plane namespaces, each with a connector Secret and one Package of
// the shared image.
type fleet struct {
	env        *environment
	o          options
	namespaces []string
	image      string
	// dead holds the Packages (namespace/name) whose hosted API server is a deadServer.
	dead map[string]bool
}

// packages returns the keys (namespace/name) of the Packages whose hosted cluster is dead, or
// of those whose hosted cluster is healthy.
func (f *fleet) packages(dead bool) map[string]bool {
	out := map[string]bool{}
	for _, ns := range f.namespaces {
		key := ns + "/" + packageName
		if f.dead[key] == dead {
			out[key] = true
		}
	}
	return out
}

// setUp creates what HyperShift would have created before anyone installs a package:
// HostedClusters (Available), their hosted-control-plane namespaces and connector Secrets. The
// namespaces are spread over the hosted control planes round-robin; -dead-percent of them,
// spread evenly, get a connector Secret whose server is a deadServer of their own.
func setUpFleet(ctx context.Context, env *environment, o options) (*fleet, error) {
	f := &fleet{env: env, o: o, image: env.proxy.Host + "/" + repository + ":" + tag, dead: map[string]bool{}}
	kubeconfigs := make([][]byte, len(env.hosted))
	for i, cp := range env.hosted {
		var err error
		if kubeconfigs[i], err = cp.ConnectorKubeconfig("pkgsync-connector"); err != nil {
			return nil, err
		}
	}
	connectors := make([][]byte, o.packages)
	for i := range o.packages {
		connectors[i] = kubeconfigs[i%len(kubeconfigs)]
	}
	for i := range deadIndices(o.packages, deadCount(o.packages, o.deadPercent)) {
		d, err := startDeadServer()
		if err != nil {
			return nil, err
		}
		env.dead = append(env.dead, d)
		if connectors[i], err = rewriteServer(connectors[i], d.URL()); err != nil {
			return nil, err
		}
		f.dead[hosted.ControlPlaneNamespace(hostedClusterNamespace, hostedClusterName(i))+"/"+packageName] = true
	}
	if err := env.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostedClusterNamespace}}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", hostedClusterNamespace, err)
	}
	for i := range o.packages {
		f.namespaces = append(f.namespaces, hosted.ControlPlaneNamespace(hostedClusterNamespace, hostedClusterName(i)))
	}
	err := parallel(ctx, o.packages, func(ctx context.Context, i int) error {
		ns := f.namespaces[i]
		var hc *unstructured.Unstructured
		if o.hostedClusters {
			var err error
			if hc, err = createHostedCluster(ctx, env.admin, hostedClusterName(i)); err != nil {
				return err
			}
		}
		if err := env.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"},
		}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		if hc != nil {
			if err := env.admin.Create(ctx, testenv.HostedControlPlane(hc, ns)); err != nil {
				return fmt.Errorf("create HostedControlPlane in %s: %w", ns, err)
			}
		}
		if err := env.admin.Create(ctx, testenv.ConnectorSecret(ns, connectors[i])); err != nil {
			return fmt.Errorf("create connector Secret in %s: %w", ns, err)
		}
		return nil
	})
	return f, err
}

func hostedClusterName(i int) string { return fmt.Sprintf("hc-%04d", i) }

// createHostedCluster creates the Available HostedCluster name as HyperShift's CLI and operator
// write it.
func createHostedCluster(ctx context.Context, c client.Client, name string) (*unstructured.Unstructured, error) {
	hc := testenv.HostedCluster(hostedClusterNamespace, name)
	if err := c.Create(ctx, hc); err != nil {
		return nil, fmt.Errorf("create HostedCluster %s: %w", name, err)
	}
	hc.Object["status"] = map[string]any{"conditions": []any{
		testenv.Condition("Available", true, "The hosted control plane is available", hc.GetGeneration()),
	}}
	if err := c.Status().Update(ctx, hc); err != nil {
		return nil, fmt.Errorf("make HostedCluster %s Available: %w", name, err)
	}
	return hc, nil
}

// push builds the package at revision and pushes it to the shared tag, around the proxy.
func (f *fleet) push(ctx context.Context, revision string) (string, error) {
	img, err := buildFleetPackage(f.env.dir, f.o.shape, f.o.objects, revision)
	if err != nil {
		return "", err
	}
	ref, err := source.ParseReference(f.env.registry.Host + "/" + repository + ":" + tag)
	if err != nil {
		return "", err
	}
	if _, err := f.env.pusher.Push(ctx, img, []source.Reference{ref}, nil); err != nil {
		return "", err
	}
	return img.Digest, nil
}

// createPackages creates one Package per namespace and returns when each was created.
func (f *fleet) createPackages(ctx context.Context) (map[string]time.Time, error) {
	var mu sync.Mutex
	created := map[string]time.Time{}
	err := parallel(ctx, len(f.namespaces), func(ctx context.Context, i int) error {
		pkg := &v1alpha1.Package{
			ObjectMeta: metav1.ObjectMeta{Name: packageName, Namespace: f.namespaces[i], Labels: shardLabels(f.o, i)},
			Spec:       v1alpha1.PackageSpec{Image: f.image, Interval: &metav1.Duration{Duration: f.o.interval}},
		}
		start := time.Now()
		if err := f.env.admin.Create(ctx, pkg); err != nil {
			return fmt.Errorf("create Package %s/%s: %w", pkg.Namespace, pkg.Name, err)
		}
		mu.Lock()
		created[pkg.Namespace+"/"+pkg.Name] = start
		mu.Unlock()
		return nil
	})
	return created, err
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt on every Package, as `flux reconcile`
// does, and returns when each request was made.
func (f *fleet) requestReconcile(ctx context.Context, token string) (map[string]time.Time, error) {
	var mu sync.Mutex
	requested := map[string]time.Time{}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token))
	err := parallel(ctx, len(f.namespaces), func(ctx context.Context, i int) error {
		pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Name: packageName, Namespace: f.namespaces[i]}}
		start := time.Now()
		if err := f.env.admin.Patch(ctx, pkg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			return fmt.Errorf("request reconcile of %s/%s: %w", pkg.Namespace, pkg.Name, err)
		}
		mu.Lock()
		requested[pkg.Namespace+"/"+pkg.Name] = start
		mu.Unlock()
		return nil
	})
	return requested, err
}

// parallel runs fn for 0..n-1 with harnessParallelism workers and returns the first error.
func parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, harnessParallelism) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// restartArrival is the converge scenario of -arrival restart: when the controller process
// started (every Package was created before), and the counters before it.
type restartArrival struct {
	created map[string]time.Time
	start   time.Time
	before  snapshot
}

// createBeforeController creates every Package while no controller runs, then takes the
// counters the converge starts from: the controller's are zero (a process starts at zero).
func createBeforeController(ctx context.Context, env *environment, f *fleet) (*restartArrival, error) {
	progress("converge (restart): creating %d Packages of %s (%d objects each) before the controller starts", len(f.namespaces), f.image, f.o.objects)
	if _, err := f.createPackages(ctx); err != nil {
		return nil, err
	}
	before, err := env.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return &restartArrival{before: before}, nil
}

// started times the converge from the controller process's start, for every Package.
func (a *restartArrival) started(ctl controllerUnderTest, namespaces []string) {
	a.start, a.created = time.Now(), map[string]time.Time{}
	switch p := ctl.(type) {
	case *processController:
		a.start = p.started
	case *shardedController:
		a.start = p.shards[0].started
	}
	for _, ns := range namespaces {
		a.created[ns+"/"+packageName] = a.start
	}
}
