package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/test/testenv"
)

// clusterTimeout bounds a wait on the real cluster's controllers: a namespace's deletion, a
// rollout, the garbage collector's sweep.
const clusterTimeout = 2 * time.Minute

// clusterEnv is a management cluster with its controllers (testenv.Cluster: the garbage
// collector, namespace lifecycle, Deployments, Jobs, the scheduler, simulated nodes) and a
// pkgsync controller of its own in this process, for the tests whose behaviour depends on what
// those controllers do. The suite's bare management plane serves every other test: there a test
// writes the status a controller would, and no controller races it. Hosted phases go to the
// suite's hosted control plane, and packages come from the suite's registry.
type clusterEnv struct {
	cluster *testenv.Cluster
	client  client.Client
	// controllerNamespace is its pkgsync controller's own namespace (--namespace), as an
	// installation has one: fleets copy the Secrets they name from there.
	controllerNamespace string
	// requests counts what its pkgsync controller sends to the cluster, by namespace.
	requests *requestCounter
	stop     func()
}

// theCluster is started by the first test that asks for it (useCluster) and stopped with the
// suite (stopCluster).
var theCluster struct {
	once sync.Once
	env  *clusterEnv
	err  error
}

// useCluster returns the suite's real cluster, starting it on first use.
func useCluster(t *testing.T) *clusterEnv {
	t.Helper()
	theCluster.once.Do(func() { theCluster.env, theCluster.err = startCluster() })
	require.NoError(t, theCluster.err, "start the e2e suite's management cluster with its controllers")
	return theCluster.env
}

func startCluster() (*clusterEnv, error) {
	dir, err := os.MkdirTemp("", "pkgsync-e2e-cluster-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	env := &clusterEnv{requests: &requestCounter{}}
	env.stop = func() {
		cancel()
		if env.cluster != nil {
			_ = env.cluster.Stop()
		}
		_ = os.RemoveAll(dir)
	}
	fail := func(err error) (*clusterEnv, error) {
		env.stop()
		return nil, err
	}
	if env.cluster, err = testenv.StartCluster(ctx, "cluster", dir, testenv.ClusterOptions{}); err != nil {
		return fail(err)
	}
	hyperShift, err := testenv.HyperShiftCRDs()
	if err != nil {
		return fail(err)
	}
	if _, err := envtest.InstallCRDs(env.cluster.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, CRDs: hyperShift,
	}); err != nil {
		return fail(fmt.Errorf("install CRDs: %w", err))
	}
	if env.client, err = client.New(env.cluster.Config, client.Options{Scheme: suite.scheme}); err != nil {
		return fail(err)
	}
	env.controllerNamespace = "pkgsync-system"
	if err := env.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: env.controllerNamespace}}); err != nil {
		return fail(fmt.Errorf("create the controller's namespace: %w", err))
	}
	// The controller's default progress interval, not the suite's 200 ms: how soon Ready follows
	// what the cluster's controllers do is part of what these tests see.
	stopped, err := startControllerOn(ctx, env.cluster.Config, env.requests, "", suite.source, func(o *reconciler.Options) {
		o.ProgressInterval = 5 * time.Second
		o.Namespace = env.controllerNamespace
	})
	if err != nil {
		return fail(err)
	}
	stopCluster := env.stop
	env.stop = func() { cancel(); <-stopped; stopCluster() }
	return env, nil
}

// stopCluster stops the suite's real cluster, if a test started it.
func stopCluster() {
	if theCluster.env != nil {
		theCluster.env.stop()
	}
}

// namespace creates a namespace on the cluster; when the test ends, it deletes the pkgsync
// resources there, then the namespace, and waits until the namespace controller has removed
// it with everything in it.
func (e *clusterEnv) namespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	return e.namedNamespace(t, fmt.Sprintf("c-%d-%d", time.Now().UnixNano()%1_000_000, nsCounter.Add(1)), labels)
}

// namedNamespace is namespace with the name given.
func (e *clusterEnv) namedNamespace(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	require.NoError(t, e.client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}))
	t.Cleanup(func() { e.deleteNamespace(t, name) })
	return name
}

// deleteNamespace deletes the pkgsync resources of a namespace (so that they tear down before
// the namespace goes), then the namespace, and waits until it is gone.
func (e *clusterEnv) deleteNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	// Namespaced kinds only: a list of a cluster-scoped kind (HostedClusterPackages) ignores the
	// namespace, and deleting what it returns deleted every fleet on the cluster, those of tests
	// still running included.
	for _, list := range []client.ObjectList{&v1alpha1.PackageList{}, &v1alpha1.ObjectDeploymentList{}} {
		require.NoError(t, e.client.List(ctx, list, client.InNamespace(name)))
		require.NoError(t, apimeta.EachListItem(list, func(o runtime.Object) error {
			return client.IgnoreNotFound(e.client.Delete(ctx, o.(client.Object)))
		}))
	}
	require.NoError(t, client.IgnoreNotFound(e.client.Delete(ctx, namespaceObj(name))))
	e.waitGone(t, namespaceObj(name))
}

// create creates obj on the cluster and deletes it when the test ends, waiting until it is gone.
func (e *clusterEnv) create(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, e.client.Create(t.Context(), obj))
	t.Cleanup(func() {
		require.NoError(t, client.IgnoreNotFound(e.client.Delete(context.WithoutCancel(t.Context()), obj)))
		e.waitGone(t, obj)
	})
}

// waitGone waits until obj no longer exists on the cluster.
func (e *clusterEnv) waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	key := client.ObjectKeyFromObject(obj)
	probe := obj.DeepCopyObject().(client.Object)
	eventuallyFor(t, ctx, clusterTimeout, func(a *attempt) {
		err := e.client.Get(ctx, key, probe)
		assert.True(a, apierrors.IsNotFound(err), "%T %s still there: %v", obj, key, err)
	}, "%T %s deleted", obj, key)
}

// ready waits until the Ready condition of a pkgsync resource has status and reason and its
// message contains text, and returns it.
func (e *clusterEnv) ready(t *testing.T, obj client.Object, status metav1.ConditionStatus, reason, text string) *metav1.Condition {
	t.Helper()
	return waitForReadyOn(t, e.client, clusterTimeout, obj, status, reason, text)
}

// hostedControlPlane makes an Available HostedCluster "guest" on the cluster and its
// hosted-control-plane namespace with the HostedControlPlane and the connector Secret
// kubeconfig, as HyperShift does, and returns the HostedCluster's namespace and the HCP
// namespace. The HCP namespace is deleted when the test ends (so before the HostedCluster's).
func (e *clusterEnv) hostedControlPlane(t *testing.T, kubeconfig []byte, labels map[string]string) (string, string) {
	t.Helper()
	hcNamespace := e.namespace(t, nil)
	hc := testenv.HostedCluster(hcNamespace, "guest")
	hc.SetLabels(labels)
	require.NoError(t, e.client.Create(t.Context(), hc))
	status := map[string]any{"conditions": []any{testenv.Condition("Available", true, "The hosted control plane is available", hc.GetGeneration())}}
	if endpoint := endpointOf(kubeconfig); endpoint != nil {
		status["controlPlaneEndpoint"] = endpoint
	}
	hc.Object["status"] = status
	require.NoError(t, e.client.Status().Update(t.Context(), hc))

	hcp := e.namedNamespace(t, hosted.ControlPlaneNamespace(hcNamespace, "guest"), map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"})
	require.NoError(t, e.client.Create(t.Context(), testenv.HostedControlPlane(hc, hcp)))
	require.NoError(t, e.client.Create(t.Context(), testenv.ConnectorSecret(hcp, kubeconfig)))
	return hcNamespace, hcp
}

// endpointOf is status.controlPlaneEndpoint for the server of a kubeconfig, nil when it names
// none with a port.
func endpointOf(kubeconfig []byte) map[string]any {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil || cfg.Contexts[cfg.CurrentContext] == nil || cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster] == nil {
		return nil
	}
	u, err := url.Parse(cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server)
	if err != nil {
		return nil
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		return nil
	}
	return map[string]any{"host": u.Hostname(), "port": port}
}
