package packages

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/reconciler/reconcilertest"
	"pkgsync.dev/pkgsync/internal/verify"
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
)

// TestFailurePackageKinds: Package and ClusterPackage follow the one rule for what follows a
// failure (reconcilertest.RunFailures).
func TestFailurePackageKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range []reconcilertest.FailureKind{
		packageKind(v1alpha1.PackageKind, func() *v1alpha1.Package { return &v1alpha1.Package{} }),
		packageKind(v1alpha1.ClusterPackageKind, func() *v1alpha1.ClusterPackage { return &v1alpha1.ClusterPackage{} }),
	} {
		reconcilertest.RunFailures(t, kind, map[reconcilertest.FailureCase]reconcilertest.Conditions{
			reconcilertest.FailRetried: reconcilertest.Retried(v1alpha1.PullFailedReason), reconcilertest.FailStalled: reconcilertest.Stalled(v1alpha1.InvalidSpecReason),
			reconcilertest.FailDeletion: reconcilertest.Retried(v1alpha1.ApplyFailedReason), reconcilertest.FailStatusWrite: {}})
	}
}

// packageKind is Package or ClusterPackage: a spec.image that does not parse is retried (a
// PullFailed, as any registry failure is), an ignoreFields rule without a kind stalls, and the
// teardown of an unreadable inventory fails.
func packageKind[T packageObject](kind string, newObject func() T) reconcilertest.FailureKind {
	return reconcilertest.FailureKind{Name: kind, Build: func(t *testing.T, fc reconcilertest.FailureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler) {
		obj := newObject()
		reconcilertest.SetFailingMeta(obj, kind == v1alpha1.PackageKind, fc)
		spec, status := obj.GetSpec(), obj.GetStatus()
		spec.Image, spec.Interval = "example.com/addons/addon:v1", &metav1.Duration{Duration: reconcilertest.FailureInterval}
		status.ObservedGeneration = 1
		switch fc {
		case reconcilertest.FailRetried, reconcilertest.FailStatusWrite:
			spec.Image = "not a reference"
		case reconcilertest.FailStalled:
			spec.IgnoreFields = []v1alpha1.IgnoreFields{{JSONPointers: []string{"/spec/replicas"}}}
		case reconcilertest.FailDeletion:
			status.Inventory = reconcilertest.UnreadableInventory()
		}
		c := reconcilertest.ApplyKindClient(t, funcs, obj).
			WithIndex(&v1alpha1.Package{}, dependsOnIndex, indexDependsOn(v1alpha1.PackageKind)).
			WithIndex(&v1alpha1.ClusterPackage{}, dependsOnIndex, indexDependsOn(v1alpha1.ClusterPackageKind)).Build()
		steps := &packageSteps[T]{apiReader: c, options: reconcilertest.FailureOptions(verifytest.ControllerNamespace), applier: failingApplier(c), renders: newRenderCache(1 << 20),
			verifier: verify.NewVerifier(c, c, verifytest.ControllerNamespace, false), versions: newImageVersions(), kind: kind,
			deps: &dependencies{reader: c, exprs: newReadyExprs()}}
		return obj, c, reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(100)}, kind, newObject, steps.steps())
	}}
}

// failingApplier is the apply pass of the resources under reconcilertest.RunFailures, on c.
func failingApplier(c client.Client) *applier.Applier {
	return &applier.Applier{Reader: c, APIReader: c, Targets: &applier.Targets{Management: c}, Metrics: reconciler.NewMetrics(), Recorder: record.NewFakeRecorder(100)}
}
