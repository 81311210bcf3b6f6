package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/controller"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond

	// hostedRequestTimeout bounds each request of the shared controller to a hosted API server.
	hostedRequestTimeout = 3 * time.Second

	// shardLabel keeps resources of the restart test away from the shared controller.
	shardLabel = "e2e.pkgsync.dev/shard"
)

// suite is shared by the controller tests: one management and one hosted control plane, a
// registry, and a controller running in this process.
var suite struct {
	mgmt, hosted             *testenv.ControlPlane
	registry                 *testenv.Registry
	scheme                   *runtime.Scheme
	mgmtClient, hostedClient client.Client
	source                   *source.Client
	hostedClients            *hosted.Clients
	// reconcileMetrics holds the Flux reconcile metrics (gotk_*) of the shared controller.
	reconcileMetrics *prometheus.Registry
	// requests counts what the in-process controllers send to the management cluster.
	requests requestCounter
	// registryRequests counts what source (controllers and tests) sends to registries.
	registryRequests *registryCounter
}

func TestMain(m *testing.M) {
	flag.Parse()
	defaultParallel()
	os.Exit(runSuite(m))
}

// defaultParallel runs up to twice as many parallel tests at once as there are CPUs (at most 8),
// unless -parallel says how many: go test's default, one per CPU, leaves a machine of two cores
// mostly idle, the tests waiting on controllers and API servers far more than they compute, and
// more than twice as many makes them wait on the CPU instead (see docs/architecture.md, Tests).
func defaultParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(min(2*goruntime.GOMAXPROCS(0), 8)))
	}
}

func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	dir, err := os.MkdirTemp("", "pkgsync-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := setupSuite(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		teardownSuite()
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startController(ctx, "!"+shardLabel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		cancel()
		teardownSuite()
		return 1
	}
	code := m.Run()
	stopCluster()
	cancel()
	<-stopped
	teardownSuite()
	return code
}

func setupSuite(dir string) error {
	var err error
	suite.scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(suite.scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(suite.scheme); err != nil {
		return err
	}
	if suite.mgmt, err = testenv.StartControlPlane("management", dir); err != nil {
		return err
	}
	if suite.hosted, err = testenv.StartControlPlaneWith("hosted", dir, testenv.ControlPlaneOptions{Audit: true}); err != nil {
		return err
	}
	if suite.registry, err = testenv.StartRegistry(context.Background(), filepath.Join(dir, "registry"), testenv.RegistryOptions{}); err != nil {
		return err
	}
	hyperShift, err := testenv.HyperShiftCRDs()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(suite.mgmt.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "config", "crd", "bases"),
			filepath.Join("testdata", "imagedigestmirrorset-crd.yaml"), filepath.Join("testdata", "imagetagmirrorset-crd.yaml")}, CRDs: hyperShift,
	}); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	if suite.mgmtClient, err = client.New(suite.mgmt.Config, client.Options{Scheme: suite.scheme}); err != nil {
		return err
	}
	if suite.hostedClient, err = client.New(suite.hosted.Config, client.Options{Scheme: suite.scheme}); err != nil {
		return err
	}
	suite.registryRequests = newRegistryCounter()
	suite.source, err = source.NewClient(source.Options{Transport: suite.registryRequests})
	return err
}

func teardownSuite() {
	if suite.registry != nil {
		_ = suite.registry.Stop()
	}
	for _, cp := range []*testenv.ControlPlane{suite.hosted, suite.mgmt} {
		if cp != nil {
			_ = cp.Stop()
		}
	}
}

// startController runs pkgsync's reconcilers for the resources matching selector, as
// `pkgsync controller` does, and returns a channel closed when the manager has stopped. Options
// are changed by the given functions, as the controller's flags would.
func startController(ctx context.Context, selector string, configure ...func(*reconciler.Options)) (<-chan struct{}, error) {
	return startControllerWith(ctx, selector, suite.source, configure...)
}

// startControllerWith is startController with src as the controller's source client.
func startControllerWith(ctx context.Context, selector string, src *source.Client, configure ...func(*reconciler.Options)) (<-chan struct{}, error) {
	return startControllerOn(ctx, suite.mgmt.Config, &suite.requests, selector, src, configure...)
}

// startControllerOn is startControllerWith on the management cluster of mgmt, its requests
// counted by requests.
func startControllerOn(ctx context.Context, mgmt *rest.Config, requests *requestCounter, selector string, src *source.Client,
	configure ...func(*reconciler.Options)) (<-chan struct{}, error) {
	return startControllerConfigured(ctx, mgmt, requests, selector, src, nil, configure...)
}

// startControllerConfigured is startControllerOn with the controller's configuration changed by
// configureController (nil: as it is), as the controller's flags would: a notifier, a Prometheus.
func startControllerConfigured(ctx context.Context, mgmt *rest.Config, requests *requestCounter, selector string, src *source.Client,
	configureController func(*controller.Config), configure ...func(*reconciler.Options)) (<-chan struct{}, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	skip := true
	cfg := rest.CopyConfig(mgmt)
	cfg.Wrap(requests.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 suite.scheme,
		Cache:                  controller.CacheOptions(hosted.DefaultSecretName, sel),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
		Client:                 controller.ClientOptions(),
		MapperProvider:         controller.NewRESTMapper,
	})
	if err != nil {
		return nil, err
	}
	hc := hosted.NewClients(mgr.GetClient(), hosted.Options{Scheme: suite.scheme, Timeout: hostedRequestTimeout,
		ProbeInterval: 250 * time.Millisecond, MaxProbeInterval: 2 * time.Second, RESTMapper: mgr.GetRESTMapper(),
		SecretDataReader: mgr.GetAPIReader()})
	recorder := metrics.NewRecorder()
	if suite.hostedClients == nil {
		suite.hostedClients = hc
		suite.reconcileMetrics = prometheus.NewRegistry()
		suite.reconcileMetrics.MustRegister(recorder.Collectors()...)
	}
	opts := reconciler.Options{
		KubernetesVersion:     "v1.36.3",
		ProgressInterval:      200 * time.Millisecond,
		RetryInterval:         500 * time.Millisecond,
		HostedTeardownTimeout: 5 * time.Second,
	}
	for _, f := range configure {
		f(&opts)
	}
	cc := controller.Config{
		Options:                 opts,
		Source:                  src,
		Hosted:                  hc,
		Metrics:                 runtimectrl.NewMetrics(mgr, recorder, v1alpha1.FinalizerName),
		MaxConcurrentReconciles: 4,
	}
	if configureController != nil {
		configureController(&cc)
	}
	err = controller.Setup(ctx, mgr, cc)
	if err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "controller:", err)
		}
	}()
	return stopped, nil
}

// runShardController runs pkgsync's reconcilers in this process for the resources labelled
// shardLabel=shard, with options changed by configure, until the test ends. The controller has
// a source client of its own (its requests counted with the suite's), as a controller process
// has: it keeps the mirror sets it watches there, and a shard of a test running in parallel
// with the mirror tests does not write the shared controller's.
func runShardController(t *testing.T, shard string, configure ...func(*reconciler.Options)) {
	t.Helper()
	runShardControllerConfigured(t, shard, nil, configure...)
}

// runShardControllerConfigured is runShardController with the controller's configuration
// changed by configureController (a notifier, a Prometheus).
func runShardControllerConfigured(t *testing.T, shard string, configureController func(*controller.Config), configure ...func(*reconciler.Options)) {
	t.Helper()
	src, err := source.NewClient(source.Options{Transport: suite.registryRequests})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startControllerConfigured(ctx, suite.mgmt.Config, &suite.requests, shardLabel+"="+shard, src, configureController, configure...)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); <-stopped })
}
