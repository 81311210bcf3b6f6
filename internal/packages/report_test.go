package packages

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// TestRequestAcknowledgedOnlyAtTheEnd: the status written in the middle of a pass (the intended
// inventory, before the first write) does not acknowledge the reconcile request yet. A
// controller killed after that write handles the request again instead of losing it.
func TestRequestAcknowledgedOnlyAtTheEnd(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{
		Namespace: "team", Name: "addon", Finalizers: []string{v1alpha1.FinalizerName},
		Annotations: map[string]string{meta.ReconcileRequestAnnotation: "now"},
	}}
	var handled []string // lastHandledReconcileAt as each status patch wrote it
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pkg).WithStatusSubresource(pkg).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			handled = append(handled, obj.(*v1alpha1.Package).Status.LastHandledReconcileAt)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()

	steps := packageSteps[*v1alpha1.Package]{}
	ks := steps.steps()
	ks.Pass = func(ctx context.Context, obj *v1alpha1.Package, rep *reconciler.Report, lastHandled string) (ctrl.Result, error) {
		assert.Empty(t, lastHandled, "the request was not handled before")
		inv := apply.Inventory{Phases: []apply.InventoryPhase{{Name: "one", Objects: []apply.ObjectRef{{Version: "v1", Kind: "ConfigMap", Namespace: "team", Name: "a"}}}}}
		return ctrl.Result{}, applier.RecordInventory(rep, &obj.Status.ApplyStatus)(ctx, inv)
	}
	l := reconciler.New(reconciler.Base{Client: c}, "Package", func() *v1alpha1.Package { return &v1alpha1.Package{} }, ks)
	_, err := l.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pkg)})
	require.NoError(t, err)
	require.Len(t, handled, 2, "the mid-pass record and the final status")
	assert.Empty(t, handled[0], "the mid-pass record does not acknowledge the request")
	assert.Equal(t, "now", handled[1], "the final status does")
}

// TestRetryThatEndsAsItBeganWritesNothing: a reconcile that marks Reconciling on the way and
// concludes with the same failure as the last one (a hosted cluster still unreachable) leaves
// every condition as it found it, transition times included, and so writes no status.
func TestRetryThatEndsAsItBeganWritesNothing(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	since := metav1.NewTime(time.Now().Add(-time.Hour).UTC().Truncate(time.Second))
	pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "addon", Generation: 1, Finalizers: []string{v1alpha1.FinalizerName}}}
	pkg.Status.Conditions = []metav1.Condition{
		// In the order Flux's condition setter keeps them.
		{Type: meta.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ProgressingWithRetryReason, Message: "still down", LastTransitionTime: since, ObservedGeneration: 1},
		{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.ApplyFailedReason, Message: "still down", LastTransitionTime: since, ObservedGeneration: 1},
	}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pkg).WithStatusSubresource(pkg).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()

	ks := (&packageSteps[*v1alpha1.Package]{}).steps()
	ks.Pass = func(ctx context.Context, obj *v1alpha1.Package, _ *reconciler.Report, _ string) (ctrl.Result, error) {
		conditions.MarkReconciling(obj, v1alpha1.ProgressingReason, "reconciling example.com/addon:v1")
		return applier.Conclude(ctx, obj, nil, errors.New("still down"), reconciler.Intervals{Interval: time.Hour, Retry: time.Second, Progress: time.Second}, "applied"), nil
	}
	l := reconciler.New(reconciler.Base{Client: c}, "Package", func() *v1alpha1.Package { return &v1alpha1.Package{} }, ks)
	_, err := l.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pkg)})
	require.NoError(t, err)
	assert.Zero(t, patches, "no status write")

	var got v1alpha1.Package
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got))
	assert.True(t, since.Equal(&conditions.Get(&got, meta.ReconcilingCondition).LastTransitionTime))
}
