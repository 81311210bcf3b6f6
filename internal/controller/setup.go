package controller

import (
	"context"
	"fmt"
	"time"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/predicates"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/fleet"
	"pkgsync.dev/pkgsync/internal/fleet/analysis"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/mirrors"
	"pkgsync.dev/pkgsync/internal/notify"
	"pkgsync.dev/pkgsync/internal/objectdeployment"
	"pkgsync.dev/pkgsync/internal/packages"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/setup"
	"pkgsync.dev/pkgsync/internal/verify"
	"pkgsync.dev/pkgsync/source"
)

// +kubebuilder:rbac:groups=pkgsync.dev,resources=packages;clusterpackages;objectdeployments;clusterobjectdeployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pkgsync.dev,resources=packages/status;clusterpackages/status;objectdeployments/status;clusterobjectdeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pkgsync.dev,resources=packages/finalizers;clusterpackages/finalizers;objectdeployments/finalizers;clusterobjectdeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=hostedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=hostedcontrolplanes,verbs=list
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Config wires the reconcilers.
type Config struct {
	Options reconciler.Options
	// Source pulls packages.
	Source *source.Client
	// Hosted reaches hosted clusters; nil disables hosted-cluster phases.
	Hosted *hosted.Clients
	// Recorder records events; nil uses the manager's.
	Recorder record.EventRecorder
	// Metrics records Flux-style readiness, suspend and duration metrics.
	Metrics runtimectrl.Metrics
	// MaxConcurrentReconciles per kind.
	MaxConcurrentReconciles int
	// AnalysisPrometheus answers the queries of fleets' spec.rollout.analysis (nil: they are
	// inconclusive).
	AnalysisPrometheus *analysis.Prometheus
	// Notifier, when set, receives every event the controllers record and forwards those
	// its endpoints want (docs/operations.md, Notifications); the manager runs it.
	Notifier *notify.Notifier
}

// Setup registers the reconcilers of every pkgsync kind with the manager. It makes what the
// kinds share once (services) and hands it to each kind's own setup: setupFleets,
// setupPackages, setupObjectDeployments. This is the one place that names the kinds.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	s, err := newServices(ctx, mgr, cfg)
	if err != nil {
		return err
	}
	if err := fleet.Setup(ctx, s); err != nil {
		return err
	}
	if err := packages.Setup(ctx, s); err != nil {
		return err
	}
	return objectdeployment.Setup(s)
}

func newServices(ctx context.Context, mgr ctrl.Manager, cfg Config) (*setup.Services, error) {
	opts := cfg.Options.WithDefaults()
	recorder := cfg.Recorder
	if recorder == nil {
		var err error
		if recorder, err = events.NewRecorder(mgr, ctrl.Log, "", "pkgsync"); err != nil {
			return nil, fmt.Errorf("create event recorder: %w", err)
		}
	}
	if cfg.Notifier != nil {
		if err := mgr.Add(cfg.Notifier); err != nil {
			return nil, fmt.Errorf("add notifier: %w", err)
		}
		recorder = &notify.Recorder{EventRecorder: recorder, Notifier: cfg.Notifier, Scheme: mgr.GetScheme()}
	}
	m := reconciler.NewMetrics()
	if err := m.Register(); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if opts.Wakes != nil {
		opts.Wakes.Observe = func(d time.Duration) { m.WakeResolution.Observe(d.Seconds()) }
	}
	ro := applier.New(mgr, opts, cfg.Hosted, m, recorder)
	hostedClusterAPI, err := startHosted(ctx, mgr, cfg.Hosted, m)
	if err != nil {
		return nil, err
	}
	ro.HostedClustersIndexed = hostedClusterAPI
	opts.HyperShift = hostedClusterAPI
	if err := mirrors.WatchSets(ctx, mgr, cfg.Source); err != nil {
		return nil, err
	}
	trustSecrets, err := verify.TrustSecretsCache(mgr, opts.Namespace)
	if err != nil {
		return nil, err
	}
	return &setup.Services{
		Manager: mgr, Source: cfg.Source, Hosted: cfg.Hosted, RuntimeMetrics: cfg.Metrics, Options: opts, Recorder: recorder, Metrics: m, Applier: ro,
		Verifier:           verify.NewVerifier(mgr.GetAPIReader(), mgr.GetClient(), opts.Namespace, opts.RequireSignatures).WithInterval(opts.VerifyInterval),
		ControllerOptions:  controller.Options{MaxConcurrentReconciles: max(cfg.MaxConcurrentReconciles, 1)},
		HostedClusterAPI:   hostedClusterAPI,
		TrustSecrets:       trustSecrets,
		AnalysisPrometheus: cfg.AnalysisPrometheus,
		SpecChanged:        predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}),
	}, nil
}

// startHosted runs the prober of unreachable hosted API servers beside the reconcile workers,
// with its metrics, and indexes HostedClusters when their API is installed, which it reports.
func startHosted(ctx context.Context, mgr ctrl.Manager, hc *hosted.Clients, m *reconciler.Metrics) (hostedClusterAPI bool, err error) {
	if hc == nil {
		return false, nil
	}
	m.ObserveHosted(hc)
	if err := mgr.Add(hc); err != nil {
		return false, fmt.Errorf("add hosted-cluster prober: %w", err)
	}
	if err := mgr.Add(m.RefreshHostedStates(hc)); err != nil {
		return false, fmt.Errorf("add hosted-cluster metrics: %w", err)
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(hosted.HostedClusterGVK.GroupKind(), hosted.HostedClusterGVK.Version); err != nil {
		return false, nil
	}
	if err := hosted.IndexHostedClusters(ctx, mgr.GetFieldIndexer()); err != nil {
		return false, fmt.Errorf("index HostedClusters: %w", err)
	}
	return true, nil
}
