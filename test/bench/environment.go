package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// environment is what the fleet runs on: real API servers and a real registry, each its own
// process, and the controller (its own process, or in this one with -controller inline).
type environment struct {
	dir    string
	scheme *runtime.Scheme
	// mgmt is a cluster with its controllers (garbage collector, namespace and ServiceAccount
	// controllers, ...), as a management cluster is: they write to its API server beside pkgsync.
	mgmt     *testenv.Cluster
	hosted   []*testenv.ControlPlane
	registry *testenv.Registry
	proxy    *registryProxy
	// admin is the harness's own client: its requests are not counted.
	admin client.Client
	// pusher pushes images straight to the registry, around the counting proxy.
	pusher *source.Client
	// dead are the hosted API servers of the dead hosted clusters (-dead-percent).
	dead []*deadServer

	// ctl is the controller under test.
	ctl controllerUnderTest
	// apiProxy is the counting proxy in front of the management API server of a controller
	// process.
	apiProxy *apiProxy
	// apiProxies are those of the shards' processes (-shards).
	apiProxies []*apiProxy
}

func startEnvironment(ctx context.Context, o options) (*environment, error) {
	dir, err := os.MkdirTemp("", "pkgsync-bench-")
	if err != nil {
		return nil, err
	}
	env := &environment{dir: dir, scheme: runtime.NewScheme()}
	if err := clientgoscheme.AddToScheme(env.scheme); err != nil {
		return env, err
	}
	if err := v1alpha1.AddToScheme(env.scheme); err != nil {
		return env, err
	}
	if env.mgmt, err = testenv.StartCluster(ctx, "management", dir, testenv.ClusterOptions{}); err != nil {
		return env, err
	}
	for i := range o.hostedPlanes {
		cp, err := testenv.StartControlPlane(fmt.Sprintf("hosted-%d", i), dir)
		if err != nil {
			return env, err
		}
		env.hosted = append(env.hosted, cp)
	}
	registryOpts := testenv.RegistryOptions{}
	if o.notifyAddr != "" {
		registryOpts.NotifyURL, registryOpts.NotifyToken = "http://"+o.notifyAddr+"/hooks/distribution", o.notifyToken
	}
	if env.registry, err = testenv.StartRegistry(ctx, filepath.Join(dir, "registry"), registryOpts); err != nil {
		return env, err
	}
	if env.proxy, err = startRegistryProxy(env.registry.Host); err != nil {
		return env, err
	}
	if env.pusher, err = source.NewClient(source.Options{}); err != nil {
		return env, err
	}
	admin := rest.CopyConfig(env.mgmt.Config)
	admin.QPS, admin.Burst = 500, 1000
	if env.admin, err = client.New(admin, client.Options{Scheme: env.scheme}); err != nil {
		return env, err
	}
	hyperShift, err := testenv.HyperShiftCRDs()
	if err != nil {
		return env, err
	}
	if _, err := envtest.InstallCRDs(env.mgmt.Config, envtest.CRDInstallOptions{Paths: []string{o.crdDir}, CRDs: hyperShift}); err != nil {
		return env, fmt.Errorf("install CRDs from %s: %w (run from the repository root)", o.crdDir, err)
	}
	return env, nil
}

// startController starts the controller under test as -controller says, and returns a channel
// closed when it has stopped.
func (env *environment) startController(ctx context.Context, o options) (<-chan error, error) {
	if o.controller == "inline" {
		c, stopped, err := startInlineController(ctx, env, o)
		env.ctl = c
		return stopped, err
	}
	if o.shards > 1 {
		c, stopped, err := startShardedController(ctx, env, o)
		if c != nil {
			env.ctl = c
			env.apiProxies = c.proxies()
		}
		return stopped, err
	}
	c, stopped, err := startProcessController(ctx, env, o, -1)
	if c != nil {
		env.ctl = c
		env.apiProxy = c.api
	}
	return stopped, err
}

func (env *environment) stop() {
	for _, d := range env.dead {
		_ = d.Close()
	}
	if env.apiProxy != nil {
		_ = env.apiProxy.Close()
	}
	for _, p := range env.apiProxies {
		_ = p.Close()
	}
	if env.proxy != nil {
		_ = env.proxy.Close()
	}
	if env.registry != nil {
		_ = env.registry.Stop()
	}
	for _, cp := range env.hosted {
		_ = cp.Stop()
	}
	_ = env.mgmt.Stop()
	_ = os.RemoveAll(env.dir)
}
