package controller

import (
	"context"
	"fmt"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/predicates"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
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
	Options Options
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
}

// Setup registers the reconcilers of every pkgsync kind with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	opts := cfg.Options.withDefaults()
	recorder := cfg.Recorder
	if recorder == nil {
		var err error
		if recorder, err = events.NewRecorder(mgr, ctrl.Log, "", "pkgsync"); err != nil {
			return fmt.Errorf("create event recorder: %w", err)
		}
	}
	m := newMetrics()
	if err := m.register(); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	ro := newRollouts(mgr, opts, cfg.Hosted, m, recorder)
	renders := newRenderCache(opts.RenderCacheBytes)
	m.observeRenderCache(renders)
	verifier := newSignatureVerifier(mgr.GetAPIReader(), mgr.GetClient(), cfg.Source, opts.Namespace, opts.RequireSignatures)
	ctrlOpts := controller.Options{MaxConcurrentReconciles: max(cfg.MaxConcurrentReconciles, 1)}

	hostedClusterAPI, err := startHosted(ctx, mgr, cfg.Hosted, m)
	if err != nil {
		return err
	}
	ro.hostedClustersIndexed = hostedClusterAPI
	if err := watchMirrorSets(ctx, mgr, cfg.Source); err != nil {
		return err
	}
	specChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{})

	lc := func() lifecycleBase {
		return lifecycleBase{client: mgr.GetClient(), recorder: recorder, metrics: cfg.Metrics}
	}
	// readsHostedCluster tells whether a Package's last render read its HostedCluster; one that
	// has not rendered yet may.
	readsHostedCluster := func(namespace, name string) bool {
		in, rendered := renders.reads(renderUser(namespace, name))
		return !rendered || in.HostedCluster
	}
	// One row per kind: its reconciler; for namespaced kinds the list that the hosted inputs
	// (connector Secret, HostedCluster) of a namespace wake, and whether a resource's templates
	// read its HostedCluster; for kinds that install an image the list that a TrustPolicy change
	// wakes.
	kinds := []struct {
		name               string
		object             client.Object
		reconciler         reconcile.Reconciler
		list               func() client.ObjectList
		readsHostedCluster func(namespace, name string) bool
		images             func() client.ObjectList
	}{
		{"package", &v1alpha1.Package{}, newLifecycle(lc(), v1alpha1.PackageKind, func() *v1alpha1.Package { return &v1alpha1.Package{} },
			(&packageSteps[*v1alpha1.Package]{apiReader: mgr.GetAPIReader(), source: cfg.Source, options: opts, rollouts: ro, renders: renders, verifier: verifier, kind: v1alpha1.PackageKind}).steps()),
			func() client.ObjectList { return &v1alpha1.PackageList{} }, readsHostedCluster, func() client.ObjectList { return &v1alpha1.PackageList{} }},
		{"clusterpackage", &v1alpha1.ClusterPackage{}, newLifecycle(lc(), v1alpha1.ClusterPackageKind, func() *v1alpha1.ClusterPackage { return &v1alpha1.ClusterPackage{} },
			(&packageSteps[*v1alpha1.ClusterPackage]{apiReader: mgr.GetAPIReader(), source: cfg.Source, options: opts, rollouts: ro, renders: renders, verifier: verifier, kind: v1alpha1.ClusterPackageKind}).steps()),
			nil, nil, func() client.ObjectList { return &v1alpha1.ClusterPackageList{} }},
		{"objectdeployment", &v1alpha1.ObjectDeployment{}, newLifecycle(lc(), v1alpha1.ObjectDeploymentKind, func() *v1alpha1.ObjectDeployment { return &v1alpha1.ObjectDeployment{} },
			(&objectDeploymentSteps[*v1alpha1.ObjectDeployment]{apiReader: mgr.GetAPIReader(), options: opts, rollouts: ro, kind: v1alpha1.ObjectDeploymentKind}).steps()),
			func() client.ObjectList { return &v1alpha1.ObjectDeploymentList{} }, nil, nil},
		{"clusterobjectdeployment", &v1alpha1.ClusterObjectDeployment{}, newLifecycle(lc(), v1alpha1.ClusterObjectDeploymentKind, func() *v1alpha1.ClusterObjectDeployment { return &v1alpha1.ClusterObjectDeployment{} },
			(&objectDeploymentSteps[*v1alpha1.ClusterObjectDeployment]{apiReader: mgr.GetAPIReader(), options: opts, rollouts: ro, kind: v1alpha1.ClusterObjectDeploymentKind}).steps()),
			nil, nil, nil},
	}
	if err := setupFleets(ctx, mgr, cfg, opts, recorder, m, verifier, ctrlOpts, specChanged); err != nil {
		return err
	}
	for _, k := range kinds {
		b := ctrl.NewControllerManagedBy(mgr).Named(k.name).For(k.object, builder.WithPredicates(specChanged)).WithOptions(ctrlOpts)
		if k.list != nil {
			b = watchHostedInputs(b, cfg.Hosted, hostedClusterAPI, listInNamespace(mgr.GetClient(), k.list), k.readsHostedCluster)
		}
		if k.images != nil {
			b = b.Watches(&v1alpha1.TrustPolicy{}, handler.EnqueueRequestsFromMapFunc(coveredResources(mgr.GetClient(), k.images, packageImage)),
				builder.WithPredicates(predicate.GenerationChangedPredicate{}))
		}
		if err := b.Complete(k.reconciler); err != nil {
			return fmt.Errorf("set up %s controller: %w", k.name, err)
		}
	}
	return nil
}

// newRollouts makes what applies a pass for every kind that applies objects.
func newRollouts(mgr ctrl.Manager, opts Options, hc *hosted.Clients, m *metrics, recorder record.EventRecorder) *rollouts {
	return &rollouts{
		engine:                apply.NewEngine(apply.Options{}),
		targets:               newTargets(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper(), hc),
		reader:                mgr.GetClient(),
		metrics:               m,
		controllerNamespace:   opts.Namespace,
		allowCrossNamespace:   opts.AllowCrossNamespace,
		apiReader:             mgr.GetAPIReader(),
		hostedNamespaceRule:   opts.HostedNamespaceRule,
		defaultServiceAccount: opts.DefaultServiceAccount,
		recorder:              recorder,
	}
}

// startHosted runs the prober of unreachable hosted API servers beside the reconcile workers,
// with its metrics, and indexes HostedClusters when their API is installed, which it reports.
func startHosted(ctx context.Context, mgr ctrl.Manager, hc *hosted.Clients, m *metrics) (hostedClusterAPI bool, err error) {
	if hc == nil {
		return false, nil
	}
	m.observeHosted(hc)
	if err := mgr.Add(hc); err != nil {
		return false, fmt.Errorf("add hosted-cluster prober: %w", err)
	}
	if err := mgr.Add(hostedStatesRunnable{m: m, c: hc}); err != nil {
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

// watchHostedInputs wakes the resources of a hosted-control-plane namespace when its connector
// Secret appears or rotates, when its HostedCluster changes what pkgsync gates on or what their
// templates read (hostedClusterEvents), and when its hosted API server answers a probe again
// after it did not. readsHostedCluster is nil for kinds without templates.
func watchHostedInputs(b *builder.Builder, hc *hosted.Clients, hostedClusterAPI bool, inNamespace func(context.Context, string) []reconcile.Request,
	readsHostedCluster func(namespace, name string) bool) *builder.Builder {
	if hc == nil {
		return b
	}
	recovered := make(chan event.GenericEvent, 1024)
	hc.OnRecovered(func(namespace string) {
		ev := event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: namespace}}}
		select {
		case recovered <- ev:
		default:
			// Never block the prober: the resources' requeue at the next probe time covers it.
		}
	})
	b = b.WatchesRawSource(crsource.Channel(recovered, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return inNamespace(ctx, o.GetNamespace())
	})))
	b = b.Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if o.GetName() != hc.SecretName() {
			return nil
		}
		return inNamespace(ctx, o.GetNamespace())
	}))
	if hostedClusterAPI {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(hosted.HostedClusterGVK)
		b = b.Watches(obj, hostedClusterEvents{
			inNamespace:        inNamespace,
			readsHostedCluster: readsHostedCluster,
			// HyperShift says the control plane is back: try it at once.
			available: hc.Reset,
		})
	}
	return b
}

// listInNamespace maps a namespace to reconcile requests for every resource of one kind in it.
func listInNamespace(c client.Client, newList func() client.ObjectList) func(context.Context, string) []reconcile.Request {
	return func(ctx context.Context, ns string) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list resources for a connector Secret change", "namespace", ns)
			return nil
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "read list", "namespace", ns)
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(items))
		for _, item := range items {
			if o, ok := item.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
			}
		}
		return reqs
	}
}
