package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rawLimit is the time a plain server-side apply of the scenario's objects takes on the same
// management API server, with one client and the same number of requests in flight: the
// distance pkgsync's time is reported against (ratio_to_raw).
type rawLimit struct {
	objects     int
	concurrency int
	duration    time.Duration
	cpu         float64 // the management kube-apiserver's CPU seconds during it
}

// managementObjects are the objects one management-only Package of objects objects holds
// (writeManagementPackage), in namespace ns: two ServiceAccounts, a Secret, ConfigMaps.
func managementObjects(ns string, objects int, revision string) []*unstructured.Unstructured {
	mk := func(kind, name string, extra map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"app.kubernetes.io/name": "fleet", "app.kubernetes.io/version": revision})
		for k, v := range extra {
			u.Object[k] = v
		}
		return u
	}
	out := []*unstructured.Unstructured{
		mk("ServiceAccount", "fleet-agent", nil),
		mk("ServiceAccount", "fleet-operator", nil),
		mk("Secret", "fleet-operator", map[string]any{"stringData": map[string]any{"token": ns + "-" + revision}}),
	}
	for i := range objects - 3 {
		out = append(out, mk("ConfigMap", fmt.Sprintf("fleet-%d", i), map[string]any{"data": map[string]any{
			"revision": revision, "hostedCluster": ns, "payload": payload}}))
	}
	return out
}

// measureRaw creates namespaces raw-0..n-1 (not timed), then applies objectsOf(namespace) to
// each with one client, concurrency requests in flight, and returns how long the applies took.
func measureRaw(ctx context.Context, cfg *rest.Config, admin client.Client, namespaces int, concurrency int, objectsOf func(ns string) []*unstructured.Unstructured) (rawLimit, error) {
	var objs []*unstructured.Unstructured
	for i := range namespaces {
		ns := fmt.Sprintf("raw-%d", i)
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			return rawLimit{}, fmt.Errorf("create namespace %s: %w", ns, err)
		}
		objs = append(objs, objectsOf(ns)...)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // as the controller's client: no client-side rate limit
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return rawLimit{}, err
	}
	// Discovery of the kinds, not timed: the controller's mapper has it cached too.
	for _, o := range objs[:min(len(objs), 3)] {
		if _, err := c.IsObjectNamespaced(o); err != nil {
			return rawLimit{}, err
		}
	}
	cpuBefore := serverCPU(cfg.Host)["apiserver_mgmt"]
	start := time.Now()
	work := make(chan *unstructured.Unstructured)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("raw"), client.ForceOwnership); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("apply %s/%s: %w", o.GetNamespace(), o.GetName(), err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, o := range objs {
		select {
		case work <- o:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	r := rawLimit{objects: len(objs), concurrency: concurrency, duration: time.Since(start)}
	r.cpu = serverCPU(cfg.Host)["apiserver_mgmt"] - cpuBefore
	return r, firstErr
}
