package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/metrics"
	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/controller"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
)

// inlineController runs pkgsync's reconcilers in this process with the settings of
// `pkgsync controller` (its cache layout, client QPS and defaults). Its figures include the
// harness's; the process mode separates them.
type inlineController struct {
	api           apiCounter
	mgr           ctrl.Manager
	hostedClients *hosted.Clients
}

// startInlineController starts the manager and returns a channel closed when it has stopped.
func startInlineController(ctx context.Context, env *environment, o options) (*inlineController, <-chan error, error) {
	log := logr.Discard()
	if o.logFile != "" {
		f, err := os.Create(o.logFile)
		if err != nil {
			return nil, nil, fmt.Errorf("create controller log: %w", err)
		}
		log = zap.New(zap.WriteTo(f))
	}
	ctrl.SetLogger(log)

	c := &inlineController{}
	cfg := rest.CopyConfig(env.mgmt.Config)
	cfg.UserAgent = "pkgsync-controller"
	cfg.QPS, cfg.Burst = 200, 400
	cfg.Wrap(c.api.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.scheme,
		Cache:                  controller.CacheOptions(hosted.DefaultSecretName, nil),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Client:                 controller.ClientOptions(),
		MapperProvider:         controller.NewRESTMapper,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create manager: %w", err)
	}
	src, err := source.NewClient(source.Options{})
	if err != nil {
		return nil, nil, err
	}
	recorder := metrics.NewRecorder()
	crmetrics.Registry.MustRegister(recorder.Collectors()...)
	// hosted.NewClients' defaults are those of `pkgsync controller`'s flags: dial 5s, request
	// 15s, probe every 2s doubling to 5m, probe timeout 3s, reconcile budget 30s. The bench's
	// hosted API servers listen on 127.0.0.1 and its HostedClusters (optional) advertise no
	// endpoint: connector kubeconfigs may name any server (--insecure-kubeconfig-any-server).
	c.hostedClients = hosted.NewClients(mgr.GetClient(), hosted.Options{Scheme: env.scheme, RESTMapper: mgr.GetRESTMapper(),
		Kubeconfig: hosted.KubeconfigPolicy{AllowAnyServer: true}, SecretDataReader: mgr.GetAPIReader()})
	err = controller.Setup(ctx, mgr, controller.Config{
		Options:                 reconciler.Options{KubernetesVersion: "v1.36.3"},
		Source:                  src,
		Hosted:                  c.hostedClients,
		Metrics:                 runtimectrl.NewMetrics(mgr, recorder, v1alpha1.FinalizerName),
		MaxConcurrentReconciles: o.workers,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("set up controller: %w", err)
	}
	c.mgr = mgr
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return c, stopped, errors.New("controller cache did not sync within a minute")
	}
	return c, stopped, nil
}

// packageInformer is the controller's own: watching costs no extra request or memory.
func (c *inlineController) packageInformer(ctx context.Context) (crcache.Informer, error) {
	return c.mgr.GetCache().GetInformer(ctx, &v1alpha1.Package{})
}

func (c *inlineController) gather(context.Context) (map[string]*dto.MetricFamily, error) {
	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather controller metrics: %w", err)
	}
	return byName(fams), nil
}

func (c *inlineController) mgmtRequests() counts { return c.api.snapshot() }

func (c *inlineController) usage(context.Context) usage {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{
		cpuSeconds: cpuSeconds(), heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine(),
		peakRSS: procStatus("self", "VmHWM"), fileRSS: procStatus("self", "RssFile"),
	}
}

func (c *inlineController) resetPeakRSS() { resetPeakRSS("self") }

func (c *inlineController) liveHeap(context.Context) (int64, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), nil
}

func (c *inlineController) heapProfile(_ context.Context, w io.Writer) error {
	runtime.GC()
	return pprof.WriteHeapProfile(w)
}

func (c *inlineController) cpuProfile(ctx context.Context, d time.Duration, w io.Writer) error {
	if err := pprof.StartCPUProfile(w); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return nil
}

func (c *inlineController) hostedClientsBuilt() int {
	_, built := c.hostedClients.Stats()
	return built
}
