package applier

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// Targets hands out the clusters phases are applied to: the management cluster (as the
// controller or as an impersonated ServiceAccount) and hosted clusters.
type Targets struct {
	config *rest.Config
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	hosted *hosted.Clients

	mu         sync.Mutex
	Management client.Client
	// impersonated holds the clients built per impersonated user, the least recently used
	// evicted past maxImpersonatedClients; made on first use, so that the zero value works.
	impersonated *lru.Cache // of client.Client, keyed by user name
}

// maxImpersonatedClients bounds the impersonating clients kept. The user names come from
// spec.serviceAccountName, which whoever writes a Package picks, so without a bound every name
// a tenant writes would cost the controller one client for as long as it runs. 1024 is one
// ServiceAccount in each of a thousand namespaces (a fleet of a thousand hosted clusters run
// with --default-service-account). Past it, a client evicted and needed again is built again:
// CPU and no API request (client-go shares the transport, whose cache key leaves impersonation
// out, and the mapper is given), never a failed apply.
const maxImpersonatedClients = 1024

func newTargets(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper, hc *hosted.Clients) *Targets {
	return &Targets{config: cfg, scheme: scheme, mapper: mapper, hosted: hc}
}

// managementTarget returns an uncached client for the management cluster: the apply engine
// reads each object once per pass, and an informer per kind would cost far more memory than
// those reads. With a ServiceAccount name, every request impersonates it.
func (t *Targets) managementTarget(namespace, serviceAccount string) (apply.Target, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if serviceAccount == "" {
		if t.Management == nil {
			c, err := client.New(t.config, client.Options{Scheme: t.scheme, Mapper: t.mapper})
			if err != nil {
				return apply.Target{}, fmt.Errorf("build management client: %w", err)
			}
			t.Management = c
		}
		return apply.Target{Client: t.Management, Name: "management cluster"}, nil
	}
	user := "system:serviceaccount:" + namespace + ":" + serviceAccount
	if t.impersonated == nil {
		t.impersonated = lru.New(maxImpersonatedClients)
	}
	if c, ok := t.impersonated.Get(user); ok {
		return apply.Target{Client: c.(client.Client), Name: "management cluster as " + user}, nil
	}
	cfg := rest.CopyConfig(t.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: t.scheme, Mapper: t.mapper})
	if err != nil {
		return apply.Target{}, fmt.Errorf("build client impersonating %s: %w", user, err)
	}
	t.impersonated.Add(user, c)
	return apply.Target{Client: c, Name: "management cluster as " + user}, nil
}

// forPass returns the targets for the classes a pass uses; hc is the HostedCluster behind
// namespace, if any. A hosted-cluster target that cannot be had is left out and its error
// returned, so that the engine still applies the phases before the first hosted one and reports
// that phase as waiting.
func (t *Targets) forPass(ctx context.Context, namespace string, hc *hosted.HostedCluster, saNamespace, serviceAccount string, classes map[string]bool) (map[string]apply.Target, error) {
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
