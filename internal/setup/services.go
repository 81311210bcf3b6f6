package setup

import (
	"context"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/fleet/analysis"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/verify"
	"pkgsync.dev/pkgsync/source"
)

// Services are what Setup makes once and every kind's setup uses.
type Services struct {
	Manager ctrl.Manager
	// Source pulls packages (Config.Source).
	Source *source.Client
	// Hosted reaches hosted clusters; nil without hosted-cluster phases (Config.Hosted).
	Hosted *hosted.Clients
	// RuntimeMetrics records Flux-style readiness, suspend and duration metrics (Config.Metrics).
	RuntimeMetrics runtimectrl.Metrics
	Options        reconciler.Options
	Recorder       record.EventRecorder
	Metrics        *reconciler.Metrics
	Applier        *applier.Applier
	Verifier       *verify.Verifier
	// TrustSecrets is the metadata cache of the controller namespace's Secrets that wakes a
	// TrustPolicy's resources when its Secret rotates (nil without a namespace).
	TrustSecrets      cache.Cache
	ControllerOptions controller.Options
	// HostedClusterAPI says the HostedCluster API was installed when the hosted prober started
	// (false without hosted clients).
	HostedClusterAPI bool
	// AnalysisPrometheus answers the queries of fleets' spec.rollout.analysis; nil without
	// --analysis-prometheus-address.
	AnalysisPrometheus *analysis.Prometheus
	// SpecChanged lets a resource's own events through when its spec changed or a reconcile
	// was requested.
	SpecChanged predicate.Predicate
}

// LifecycleBase is the part of every kind's lifecycle that the services give.
func (s *Services) LifecycleBase() reconciler.Base {
	return reconciler.Base{Client: s.Manager.GetClient(), Recorder: s.Recorder, Metrics: s.RuntimeMetrics}
}

// ControllerFor starts the controller of one kind, woken by its own spec changes.
func (s *Services) ControllerFor(name string, object client.Object) *builder.Builder {
	return ctrl.NewControllerManagedBy(s.Manager).Named(name).For(object, builder.WithPredicates(s.SpecChanged)).WithOptions(s.ControllerOptions)
}

// WatchTrustPolicies wakes the resources of a kind whose image a TrustPolicy covers when the
// policy is created, changed or deleted (verify.CoveredResources), or its Secret is (verify.WatchTrustSecrets).
func (s *Services) WatchTrustPolicies(b *builder.Builder, newList func() client.ObjectList, image func(client.Object) string) *builder.Builder {
	b = b.Watches(&v1alpha1.TrustPolicy{}, handler.EnqueueRequestsFromMapFunc(verify.CoveredResources(s.Manager.GetClient(), newList, image)),
		builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if s.TrustSecrets == nil {
		return b
	}
	return verify.WatchTrustSecrets(b, s.TrustSecrets, s.Options.Namespace, s.Manager.GetClient(), newList, image)
}

// WatchRegistryWakes wakes the resources of a kind that follow a repository when a registry
// notification names it (Options.Wakes; nothing without a receiver). follows says what a
// resource follows: its image and semver range.
func (s *Services) WatchRegistryWakes(ctx context.Context, b *builder.Builder, object client.Object, newList func() client.ObjectList,
	follows func(client.Object) (image, semver string)) (*builder.Builder, error) {
	if s.Options.Wakes == nil {
		return b, nil
	}
	wakes, err := s.Options.Wakes.Watch(ctx, s.Manager, object, newList, follows)
	if err != nil {
		return nil, err
	}
	return b.WatchesRawSource(wakes), nil
}

// WatchHostedInputs wakes the resources of a namespaced kind when the hosted inputs of their
// namespace change (the package-level watchHostedInputs).
func (s *Services) WatchHostedInputs(b *builder.Builder, newList func() client.ObjectList, readsHostedCluster func(namespace, name string) bool) *builder.Builder {
	return watchHostedInputs(b, s.Hosted, s.HostedClusterAPI, listInNamespace(s.Manager.GetClient(), newList), readsHostedCluster)
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
	b = b.WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
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
		return RequestsFor(ctx, c, newList(), "a connector Secret change in namespace "+ns, client.InNamespace(ns))
	}
}

// RequestsFor lists the resources opts select into list and maps them to reconcile requests;
// why names the change that wakes them, for the log when the list fails (nothing is woken then:
// the resources are still looked at on their interval).
func RequestsFor(ctx context.Context, c client.Reader, list client.ObjectList, why string, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list resources for "+why)
		return nil
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "read list of resources for "+why)
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
