package fleet

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/reconciler/reconcilertest"
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
)

// TestFailureFleet: HostedClusterPackage follows the one rule for what follows a failure
// (reconcilertest.RunFailures).
func TestFailureFleet(t *testing.T) {
	t.Parallel()
	reconcilertest.RunFailures(t, fleetKind(newFleetFixture(t)), map[reconcilertest.FailureCase]reconcilertest.Conditions{
		reconcilertest.FailRetried: reconcilertest.Retried(v1alpha1.ApplyFailedReason), reconcilertest.FailStalled: reconcilertest.Stalled(v1alpha1.InvalidSpecReason),
		reconcilertest.FailDeletion: reconcilertest.Retried(v1alpha1.ApplyFailedReason), reconcilertest.FailStatusWrite: {}})
}

// fleetKind is HostedClusterPackage, whose target resolves (the fixture's registry): the
// HostedClusters cannot be listed (retried), a maintenance window in a time zone that does not
// exist stalls, and its member cannot be deleted.
func fleetKind(f *fleetFixture) reconcilertest.FailureKind {
	unavailable := apierrors.NewServiceUnavailable("the API server is shutting down")
	return reconcilertest.FailureKind{Name: v1alpha1.HostedClusterPackageKind, Build: func(t *testing.T, fc reconcilertest.FailureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler) {
		fleet := fleetOn(f.Reg.Host+"/addons/signed:v1", nil, nil)
		reconcilertest.SetFailingMeta(fleet, false, fc)
		fleet.UID = "fleet-uid"
		fleet.Spec.Template.Spec.Interval = &metav1.Duration{Duration: reconcilertest.FailureInterval}
		fleet.Status.ObservedGeneration = 1
		switch fc {
		case reconcilertest.FailRetried, reconcilertest.FailStatusWrite:
			funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*unstructured.UnstructuredList); ok {
					return unavailable // the HostedClusters
				}
				return c.List(ctx, list, opts...)
			}
		case reconcilertest.FailStalled:
			fleet.Spec.Rollout.Windows = []v1alpha1.FleetWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Nowhere/Else"}}
		case reconcilertest.FailDeletion:
			funcs.Delete = func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return unavailable
			}
		}
		member := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters-a", Name: "addon", Labels: map[string]string{v1alpha1.FleetLabel: "addon"},
			Annotations: map[string]string{v1alpha1.FleetUIDAnnotation: "fleet-uid"}}}
		steps, c := f.stepsWith(t, &funcs, fleet, member)
		steps.options = reconcilertest.FailureOptions(verifytest.ControllerNamespace)
		return fleet, c, reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(100)}, v1alpha1.HostedClusterPackageKind,
			func() *v1alpha1.HostedClusterPackage { return &v1alpha1.HostedClusterPackage{} }, steps.steps())
	}}
}
