package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// setupFleets registers the HostedClusterPackage reconciler: woken by its own spec, by any
// change of its members (their status drives the rollout; an edit of their spec is reverted),
// by HostedClusters joining, leaving or changing labels, and by TrustPolicies covering its image.
func setupFleets(ctx context.Context, mgr ctrl.Manager, cfg Config, opts Options, recorder record.EventRecorder, m *metrics,
	verifier *signatureVerifier, ctrlOpts controller.Options, specChanged predicate.Predicate) error {
	_, err := mgr.GetRESTMapper().RESTMapping(hosted.HostedClusterGVK.GroupKind(), hosted.HostedClusterGVK.Version)
	hostedClusterAPI := err == nil
	steps := &fleetSteps{
		client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), source: cfg.Source, verifier: verifier, recorder: recorder,
		own: m, options: opts, hostedClusterAPI: hostedClusterAPI, now: time.Now,
	}
	base := lifecycleBase{client: mgr.GetClient(), recorder: recorder, metrics: cfg.Metrics}
	r := newLifecycle(base, v1alpha1.HostedClusterPackageKind, func() *v1alpha1.HostedClusterPackage { return &v1alpha1.HostedClusterPackage{} }, steps.steps())
	isMember := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[v1alpha1.FleetLabel]
		return ok
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("hostedclusterpackage").
		For(&v1alpha1.HostedClusterPackage{}, builder.WithPredicates(specChanged)).
		Watches(&v1alpha1.Package{}, handler.EnqueueRequestsFromMapFunc(membersFleet), builder.WithPredicates(isMember)).
		Watches(&v1alpha1.TrustPolicy{}, handler.EnqueueRequestsFromMapFunc(coveredResources(mgr.GetClient(),
			func() client.ObjectList { return &v1alpha1.HostedClusterPackageList{} }, fleetImage)), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(ctrlOpts)
	if opts.Wakes != nil {
		wakes, err := opts.Wakes.watch(ctx, mgr, &v1alpha1.HostedClusterPackage{}, func() client.ObjectList { return &v1alpha1.HostedClusterPackageList{} }, followedFleetImage)
		if err != nil {
			return err
		}
		b = b.WatchesRawSource(wakes)
	}
	if hostedClusterAPI {
		hc := &unstructured.Unstructured{}
		hc.SetGroupVersionKind(hosted.HostedClusterGVK)
		b = b.Watches(hc, handler.EnqueueRequestsFromMapFunc(fleetsOf(mgr.GetClient())), builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("set up hostedclusterpackage controller: %w", err)
	}
	return nil
}
