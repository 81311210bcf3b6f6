package fleet

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/setup"
)

// Setup registers the HostedClusterPackage reconciler: woken by its own spec and approvals, by any
// change of its members (their status drives the rollout; an edit of their spec is reverted),
// by the fleets its spec.dependsOn ties it to and their members (depends_watch.go),
// by HostedClusters joining, leaving, changing labels, being held or released, changing their
// maintenance windows, becoming Available or not, paused or resumed, by TrustPolicies covering
// its image, and by the Secrets it copies to its members changing, at their source or in a
// member's namespace. Members and copies are recognised by fleetWakes, not by their label
// alone, which anyone may write.
func Setup(ctx context.Context, s *setup.Services) error {
	mgr := s.Manager
	_, err := mgr.GetRESTMapper().RESTMapping(hosted.HostedClusterGVK.GroupKind(), hosted.HostedClusterGVK.Version)
	hostedClusterAPI := err == nil
	steps := &fleetSteps{
		client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), source: s.Source, verifier: s.Verifier, recorder: s.Recorder,
		own: s.Metrics, options: s.Options, hostedClusterAPI: hostedClusterAPI, now: time.Now, applier: s.Applier,
		analyses: newAnalyses(s.AnalysisPrometheus),
	}
	secrets, secretCaches, err := setupFleetSecrets(ctx, s)
	if err != nil {
		return err
	}
	steps.secrets = secrets
	r := reconciler.New(s.LifecycleBase(), v1alpha1.HostedClusterPackageKind, func() *v1alpha1.HostedClusterPackage { return &v1alpha1.HostedClusterPackage{} }, steps.steps())
	if hostedClusterAPI && !s.HostedClusterAPI {
		// Without hosted clients, startHosted did not index HostedClusters; fleetWakes reads
		// them by that index rather than listing them all at each labelled object's change.
		if err := hosted.IndexHostedClusters(ctx, mgr.GetFieldIndexer()); err != nil {
			return fmt.Errorf("index HostedClusters: %w", err)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.HostedClusterPackage{}, fleetDependsOnIndex, indexFleetDependsOn); err != nil {
		return fmt.Errorf("index HostedClusterPackages by spec.dependsOn: %w", err)
	}
	wakes := fleetWakes{fleets: mgr.GetClient(), hostedClusters: mgr.GetClient(), controlPlanes: mgr.GetAPIReader(), hostedClusterAPI: hostedClusterAPI}
	isMember := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[v1alpha1.FleetLabel]
		return ok
	})
	b := s.ControllerFor("hostedclusterpackage", &v1alpha1.HostedClusterPackage{}).
		Watches(&v1alpha1.Package{}, handler.EnqueueRequestsFromMapFunc(wakes.member), builder.WithPredicates(isMember)).
		Watches(&v1alpha1.Package{}, handler.EnqueueRequestsFromMapFunc(wakes.dependencyMember), builder.WithPredicates(isMember, memberGateChanged)).
		Watches(&v1alpha1.HostedClusterPackage{}, wakes.dependencyFleets()).
		Watches(&v1alpha1.HostedClusterPackage{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false }, DeleteFunc: func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false }, UpdateFunc: approvalsChanged}))
	b = s.WatchTrustPolicies(b, func() client.ObjectList { return &v1alpha1.HostedClusterPackageList{} }, fleetImage)
	if secretCaches != nil {
		b = secretCaches.watch(b, mgr.GetClient(), wakes, s.Options.Namespace)
	}
	b, err = s.WatchRegistryWakes(ctx, b, &v1alpha1.HostedClusterPackage{}, func() client.ObjectList { return &v1alpha1.HostedClusterPackageList{} }, followedFleetImage)
	if err != nil {
		return err
	}
	if hostedClusterAPI {
		hc := &unstructured.Unstructured{}
		hc.SetGroupVersionKind(hosted.HostedClusterGVK)
		b = b.Watches(hc, handler.EnqueueRequestsFromMapFunc(fleetsOf(mgr.GetClient())), builder.WithPredicates(predicate.Or[client.Object](
			predicate.LabelChangedPredicate{}, predicate.Funcs{UpdateFunc: fleetGateChanged})))
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("set up hostedclusterpackage controller: %w", err)
	}
	return nil
}

// fleetImage is the image of a HostedClusterPackage's template, for verify.CoveredResources.
func fleetImage(o client.Object) string {
	if f, ok := o.(*v1alpha1.HostedClusterPackage); ok {
		return f.Spec.Template.Spec.Image
	}
	return ""
}

// fleetGateChanged tells whether an update of a HostedCluster changes what blocks or holds its
// member: its availability or pause (hostedClusterState), its pkgsync.dev/hold annotation or
// its maintenance windows (pkgsync.dev/maintenance-windows).
func fleetGateChanged(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	for _, key := range []string{v1alpha1.HoldAnnotation, v1alpha1.MaintenanceWindowsAnnotation} {
		oldValue, oldSet := e.ObjectOld.GetAnnotations()[key]
		newValue, newSet := e.ObjectNew.GetAnnotations()[key]
		if oldSet != newSet || oldValue != newValue {
			return true
		}
	}
	return setup.HostedClusterState(e.ObjectOld) != setup.HostedClusterState(e.ObjectNew)
}

// followedFleetImage is what a HostedClusterPackage follows: its template's image by tag.
func followedFleetImage(o client.Object) (image, semver string) {
	if f, ok := o.(*v1alpha1.HostedClusterPackage); ok {
		return f.Spec.Template.Spec.Image, ""
	}
	return "", ""
}
