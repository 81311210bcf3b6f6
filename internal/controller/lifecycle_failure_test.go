package controller

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/reconciler/reconcilertest"
	"pkgsync.dev/pkgsync/internal/verify"
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
)

// The intervals of every resource in TestFailureEveryKind: the controller's retry and progress
// intervals, and each resource's own interval.
const (
	failureRetry    = 7 * time.Second
	failureProgress = 3 * time.Second
	failureInterval = time.Hour
)

// failureKind is one kind under TestFailureEveryKind: build makes a resource of the kind that
// fails as fc says (generation 2, generation 1 observed, pkgsync's finalizer), a fake
// management cluster holding it with the requests funcs intercepts, and the kind's reconciler
// (its own steps in the shared lifecycle) on that cluster.
type failureKind struct {
	name  string
	build func(t *testing.T, fc failureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler)
}

// failureCase is how a resource fails.
type failureCase int

const (
	// failRetried: a pass fails in a way that trying again can mend.
	failRetried failureCase = iota
	// failStalled: a pass fails in a way only a change of spec can mend.
	failStalled
	// failDeletion: the deletion step fails.
	failDeletion
	// failStatusWrite: a pass fails, and so does the status write that would report it.
	failStatusWrite
)

// TestFailureEveryKind: one rule for what follows a failure, for every kind. A pass or a
// deletion step that fails leaves Ready=False with the reason its error maps to, and either
// Reconciling=ProgressingWithRetry, coming back after the retry interval, or Stalled, coming
// back after the interval; neither goes to the work queue. A retried failure does not observe
// the generation; a stall does. Only a status write that fails, which status cannot report,
// goes to the work queue (its backoff), for every kind alike.
func TestFailureEveryKind(t *testing.T) {
	t.Parallel()
	fleets := newFleetFixture(t)
	retried := func(reason string) reconcilertest.Conditions {
		return reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: reason, ReconcilingReason: v1alpha1.ProgressingWithRetryReason}
	}
	stalled := func(reason string) reconcilertest.Conditions {
		return reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: reason, StalledBy: reason}
	}
	tests := []struct {
		kind failureKind
		// want is what each case leaves of the conditions (failStatusWrite: none, nothing is written).
		want map[failureCase]reconcilertest.Conditions
	}{
		{packageKind(v1alpha1.PackageKind, func() *v1alpha1.Package { return &v1alpha1.Package{} }), map[failureCase]reconcilertest.Conditions{
			failRetried: retried(v1alpha1.PullFailedReason), failStalled: stalled(v1alpha1.InvalidSpecReason),
			failDeletion: retried(v1alpha1.ApplyFailedReason), failStatusWrite: {}}},
		{packageKind(v1alpha1.ClusterPackageKind, func() *v1alpha1.ClusterPackage { return &v1alpha1.ClusterPackage{} }), map[failureCase]reconcilertest.Conditions{
			failRetried: retried(v1alpha1.PullFailedReason), failStalled: stalled(v1alpha1.InvalidSpecReason),
			failDeletion: retried(v1alpha1.ApplyFailedReason), failStatusWrite: {}}},
		{objectDeploymentKind(v1alpha1.ObjectDeploymentKind, func() *v1alpha1.ObjectDeployment { return &v1alpha1.ObjectDeployment{} }), map[failureCase]reconcilertest.Conditions{
			failRetried: retried(v1alpha1.ApplyFailedReason), failStalled: stalled(v1alpha1.RenderFailedReason),
			failDeletion: retried(v1alpha1.ApplyFailedReason), failStatusWrite: {}}},
		{objectDeploymentKind(v1alpha1.ClusterObjectDeploymentKind, func() *v1alpha1.ClusterObjectDeployment { return &v1alpha1.ClusterObjectDeployment{} }), map[failureCase]reconcilertest.Conditions{
			failRetried: retried(v1alpha1.ApplyFailedReason), failStalled: stalled(v1alpha1.RenderFailedReason),
			failDeletion: retried(v1alpha1.ApplyFailedReason), failStatusWrite: {}}},
		{fleetKind(fleets), map[failureCase]reconcilertest.Conditions{
			failRetried: retried(v1alpha1.ApplyFailedReason), failStalled: stalled(v1alpha1.InvalidSpecReason),
			failDeletion: retried(v1alpha1.ApplyFailedReason), failStatusWrite: {}}},
	}
	names := map[failureCase]string{failRetried: "retried", failStalled: "stalled", failDeletion: "deletion fails", failStatusWrite: "status write fails"}
	for _, tt := range tests {
		for fc, want := range tt.want {
			t.Run(tt.kind.name+"/"+names[fc], func(t *testing.T) {
				t.Parallel()
				var funcs interceptor.Funcs
				if fc == failStatusWrite {
					funcs.SubResourcePatch = func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
						return apierrors.NewServiceUnavailable("etcd is down")
					}
				}
				obj, c, r := tt.kind.build(t, fc, funcs)
				res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})

				stored := obj.DeepCopyObject().(reconciler.Object)
				require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(obj), stored))
				generation := observedGeneration(t, stored)
				if fc == failStatusWrite {
					assert.True(t, apierrors.IsServiceUnavailable(err), "returned to the work queue: %v", err)
					assert.Nil(t, conditions.Get(stored, meta.ReadyCondition), "nothing written")
					return
				}
				require.NoError(t, err, "a failure is reported in status, not returned to the work queue")
				reconcilertest.AssertConditions(t, stored, want)
				assert.NotEmpty(t, conditions.GetMessage(stored, meta.ReadyCondition), "Ready says what failed")
				if fc == failStalled {
					assert.Equal(t, ctrl.Result{RequeueAfter: failureInterval}, res, "a stall comes back after the interval")
					assert.Equal(t, int64(2), generation, "a stall is the generation's outcome")
					return
				}
				assert.Equal(t, ctrl.Result{RequeueAfter: failureRetry}, res, "a retried failure comes back after the retry interval")
				assert.Equal(t, int64(1), generation, "a retried failure is not the generation's outcome")
			})
		}
	}
}

// observedGeneration is status.observedGeneration of any pkgsync resource.
func observedGeneration(t *testing.T, obj client.Object) int64 {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	g, _, err := unstructured.NestedInt64(u, "status", "observedGeneration")
	require.NoError(t, err)
	return g
}

// setFailingMeta gives obj the metadata of a resource in TestFailureEveryKind: namespace
// "team" for namespaced kinds, and deleted for failDeletion.
func setFailingMeta(obj client.Object, namespaced bool, fc failureCase) {
	obj.SetName("addon")
	obj.SetGeneration(2)
	obj.SetUID("uid-1")
	obj.SetFinalizers([]string{v1alpha1.FinalizerName})
	if namespaced {
		obj.SetNamespace("team")
	}
	if fc == failDeletion {
		obj.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	}
}

// unreadableInventory is an inventory entry the controller cannot read: a pass or teardown
// that reads it fails, and trying again can mend it (nothing stalls on it).
var unreadableInventory = &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{{Name: "deploy", Objects: []string{"not-an-id"}}}}

// applyKindClient is a fake management cluster for the kinds that apply objects, with the
// index their deletion lists dependents by.
func applyKindClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).
		WithStatusSubresource(&v1alpha1.Package{}, &v1alpha1.ClusterPackage{}, &v1alpha1.ObjectDeployment{}, &v1alpha1.ClusterObjectDeployment{}).
		WithIndex(&v1alpha1.Package{}, dependsOnIndex, indexDependsOn(v1alpha1.PackageKind)).
		WithIndex(&v1alpha1.ClusterPackage{}, dependsOnIndex, indexDependsOn(v1alpha1.ClusterPackageKind)).Build()
}

func failureOptions() reconciler.Options {
	return reconciler.Options{Namespace: verifytest.ControllerNamespace, RetryInterval: failureRetry, ProgressInterval: failureProgress, HostedTeardownTimeout: time.Hour}
}

func failureApplier(c client.Client) *applier.Applier {
	return &applier.Applier{Reader: c, APIReader: c, Targets: &applier.Targets{Management: c}, Metrics: reconciler.NewMetrics(), Recorder: record.NewFakeRecorder(100)}
}

// packageKind is Package or ClusterPackage: a spec.image that does not parse is retried (a
// PullFailed, as any registry failure is), an ignoreFields rule without a kind stalls, and the
// teardown of an unreadable inventory fails.
func packageKind[T packageObject](kind string, newObject func() T) failureKind {
	return failureKind{name: kind, build: func(t *testing.T, fc failureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler) {
		obj := newObject()
		setFailingMeta(obj, kind == v1alpha1.PackageKind, fc)
		spec, status := obj.GetSpec(), obj.GetStatus()
		spec.Image, spec.Interval = "example.com/addons/addon:v1", &metav1.Duration{Duration: failureInterval}
		status.ObservedGeneration = 1
		switch fc {
		case failRetried, failStatusWrite:
			spec.Image = "not a reference"
		case failStalled:
			spec.IgnoreFields = []v1alpha1.IgnoreFields{{JSONPointers: []string{"/spec/replicas"}}}
		case failDeletion:
			status.Inventory = unreadableInventory
		}
		c := applyKindClient(t, funcs, obj)
		steps := &packageSteps[T]{apiReader: c, options: failureOptions(), applier: failureApplier(c), renders: newRenderCache(1 << 20),
			verifier: verify.NewVerifier(c, c, nil, verifytest.ControllerNamespace, false), versions: newImageVersions(), kind: kind,
			deps: &dependencies{reader: c, exprs: newReadyExprs()}}
		return obj, c, reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(100)}, kind, newObject, steps.steps())
	}}
}

// objectDeploymentKind is ObjectDeployment or ClusterObjectDeployment: an unreadable inventory
// in status fails the pass (retried) and the teardown, an object without a kind stalls.
func objectDeploymentKind[T objectDeploymentObject](kind string, newObject func() T) failureKind {
	return failureKind{name: kind, build: func(t *testing.T, fc failureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler) {
		obj := newObject()
		setFailingMeta(obj, kind == v1alpha1.ObjectDeploymentKind, fc)
		spec, status := obj.GetSpec(), obj.GetStatus()
		spec.Interval = &metav1.Duration{Duration: failureInterval}
		spec.Template.Spec.Phases = []v1alpha1.ObjectSetPhase{{Name: "deploy"}}
		status.ObservedGeneration = 1
		switch fc {
		case failRetried, failStatusWrite, failDeletion:
			status.Inventory = unreadableInventory
		case failStalled:
			spec.Template.Spec.Phases[0].Objects = []v1alpha1.ObjectSetObject{{Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"no-kind"}}`)}}}
		}
		c := applyKindClient(t, funcs, obj)
		steps := &objectDeploymentSteps[T]{apiReader: c, options: failureOptions(), applier: failureApplier(c), kind: kind}
		return obj, c, reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(100)}, kind, newObject, steps.steps())
	}}
}

// fleetKind is HostedClusterPackage, whose target resolves (the fixture's registry): the
// HostedClusters cannot be listed (retried), a maintenance window in a time zone that does not
// exist stalls, and its member cannot be deleted.
func fleetKind(f *fleetFixture) failureKind {
	unavailable := apierrors.NewServiceUnavailable("the API server is shutting down")
	return failureKind{name: v1alpha1.HostedClusterPackageKind, build: func(t *testing.T, fc failureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler) {
		fleet := fleetOn(f.Reg.Host+"/addons/signed:v1", nil, nil)
		setFailingMeta(fleet, false, fc)
		fleet.UID = "fleet-uid"
		fleet.Spec.Template.Spec.Interval = &metav1.Duration{Duration: failureInterval}
		fleet.Status.ObservedGeneration = 1
		switch fc {
		case failRetried, failStatusWrite:
			funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*unstructured.UnstructuredList); ok {
					return unavailable // the HostedClusters
				}
				return c.List(ctx, list, opts...)
			}
		case failStalled:
			fleet.Spec.Rollout.Windows = []v1alpha1.FleetWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Nowhere/Else"}}
		case failDeletion:
			funcs.Delete = func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return unavailable
			}
		}
		member := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters-a", Name: "addon", Labels: map[string]string{v1alpha1.FleetLabel: "addon"},
			Annotations: map[string]string{v1alpha1.FleetUIDAnnotation: "fleet-uid"}}}
		steps, c := f.stepsWith(t, &funcs, fleet, member)
		steps.options = failureOptions()
		return fleet, c, reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(100)}, v1alpha1.HostedClusterPackageKind,
			func() *v1alpha1.HostedClusterPackage { return &v1alpha1.HostedClusterPackage{} }, steps.steps())
	}}
}
