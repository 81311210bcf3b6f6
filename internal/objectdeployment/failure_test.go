package objectdeployment

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/reconciler/reconcilertest"
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
)

// TestFailureObjectDeploymentKinds: ObjectDeployment and ClusterObjectDeployment follow the one
// rule for what follows a failure (reconcilertest.RunFailures).
func TestFailureObjectDeploymentKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range []reconcilertest.FailureKind{
		objectDeploymentKind(v1alpha1.ObjectDeploymentKind, func() *v1alpha1.ObjectDeployment { return &v1alpha1.ObjectDeployment{} }),
		objectDeploymentKind(v1alpha1.ClusterObjectDeploymentKind, func() *v1alpha1.ClusterObjectDeployment { return &v1alpha1.ClusterObjectDeployment{} }),
	} {
		reconcilertest.RunFailures(t, kind, map[reconcilertest.FailureCase]reconcilertest.Conditions{
			reconcilertest.FailRetried: reconcilertest.Retried(v1alpha1.ApplyFailedReason), reconcilertest.FailStalled: reconcilertest.Stalled(v1alpha1.RenderFailedReason),
			reconcilertest.FailDeletion: reconcilertest.Retried(v1alpha1.ApplyFailedReason), reconcilertest.FailStatusWrite: {}})
	}
}

// objectDeploymentKind is ObjectDeployment or ClusterObjectDeployment: an unreadable inventory
// in status fails the pass (retried) and the teardown, an object without a kind stalls.
func objectDeploymentKind[T objectDeploymentObject](kind string, newObject func() T) reconcilertest.FailureKind {
	return reconcilertest.FailureKind{Name: kind, Build: func(t *testing.T, fc reconcilertest.FailureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler) {
		obj := newObject()
		reconcilertest.SetFailingMeta(obj, kind == v1alpha1.ObjectDeploymentKind, fc)
		spec, status := obj.GetSpec(), obj.GetStatus()
		spec.Interval = &metav1.Duration{Duration: reconcilertest.FailureInterval}
		spec.Template.Spec.Phases = []v1alpha1.ObjectSetPhase{{Name: "deploy"}}
		status.ObservedGeneration = 1
		switch fc {
		case reconcilertest.FailRetried, reconcilertest.FailStatusWrite, reconcilertest.FailDeletion:
			status.Inventory = reconcilertest.UnreadableInventory()
		case reconcilertest.FailStalled:
			spec.Template.Spec.Phases[0].Objects = []v1alpha1.ObjectSetObject{{Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"no-kind"}}`)}}}
		}
		c := reconcilertest.ApplyKindClient(t, funcs, obj).Build()
		steps := &objectDeploymentSteps[T]{apiReader: c, options: reconcilertest.FailureOptions(verifytest.ControllerNamespace), applier: failingObjectDeploymentApplier(c), kind: kind}
		return obj, c, reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(100)}, kind, newObject, steps.steps())
	}}
}

// failingObjectDeploymentApplier is the apply pass of the resources under reconcilertest.RunFailures, on c.
func failingObjectDeploymentApplier(c client.Client) *applier.Applier {
	return &applier.Applier{Reader: c, APIReader: c, Targets: &applier.Targets{Management: c}, Metrics: reconciler.NewMetrics(), Recorder: record.NewFakeRecorder(100)}
}
