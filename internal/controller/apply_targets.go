package controller

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// targets hands out the clusters phases are applied to: the management cluster (as the
// controller or as an impersonated ServiceAccount) and hosted clusters.
type targets struct {
	config *rest.Config
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	hosted *hosted.Clients

	mu           sync.Mutex
	management   client.Client
	impersonated map[string]client.Client
}

func newTargets(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper, hc *hosted.Clients) *targets {
	return &targets{config: cfg, scheme: scheme, mapper: mapper, hosted: hc, impersonated: map[string]client.Client{}}
}

// managementTarget returns an uncached client for the management cluster: the apply engine
// reads each object once per pass, and an informer per kind would cost far more memory than
// those reads. With a ServiceAccount name, every request impersonates it.
func (t *targets) managementTarget(namespace, serviceAccount string) (apply.Target, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if serviceAccount == "" {
		if t.management == nil {
			c, err := client.New(t.config, client.Options{Scheme: t.scheme, Mapper: t.mapper})
			if err != nil {
				return apply.Target{}, fmt.Errorf("build management client: %w", err)
			}
			t.management = c
		}
		return apply.Target{Client: t.management, Name: "management cluster"}, nil
	}
	user := "system:serviceaccount:" + namespace + ":" + serviceAccount
	c, ok := t.impersonated[user]
	if !ok {
		cfg := rest.CopyConfig(t.config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		var err error
		c, err = client.New(cfg, client.Options{Scheme: t.scheme, Mapper: t.mapper})
		if err != nil {
			return apply.Target{}, fmt.Errorf("build client impersonating %s: %w", user, err)
		}
		t.impersonated[user] = c
	}
	return apply.Target{Client: c, Name: "management cluster as " + user}, nil
}

// forPass returns the targets for the classes a pass uses; hc is the HostedCluster behind
// namespace, if any. A hosted-cluster target that cannot be had is left out and its error
// returned, so that the engine still applies the phases before the first hosted one and reports
// that phase as waiting.
func (t *targets) forPass(ctx context.Context, namespace string, hc *hosted.HostedCluster, saNamespace, serviceAccount string, classes map[string]bool) (map[string]apply.Target, error) {
	out := map[string]apply.Target{}
	if classes[""] {
		mt, err := t.managementTarget(saNamespace, serviceAccount)
		if err != nil {
			return nil, err
		}
		out[""] = mt
	}
	if !classes[classHosted] {
		return out, nil
	}
	if namespace == "" {
		return out, &apply.TargetUnavailableError{Class: classHosted, Err: fmt.Errorf("cluster-scoped resources have no hosted-control-plane namespace; install the package with a Package in the hosted-control-plane namespace")}
	}
	if t.hosted == nil {
		return out, &apply.TargetUnavailableError{Class: classHosted, Err: fmt.Errorf("hosted-cluster phases are disabled in this controller")}
	}
	ht, err := t.hosted.Target(ctx, namespace, hc)
	if err != nil {
		return out, err
	}
	out[classHosted] = ht
	return out, nil
}
