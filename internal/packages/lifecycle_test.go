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
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// TestLifecycle: what the lifecycle every kind shares does with a resource in each state, before
// and after the kind's own pass: which step runs, what it returns, whether the finalizer is
// written, the request acknowledged and the generation observed.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	const token = "2026-01-01T00:00:00Z"
	errTransient := errors.New("registry down")
	type step struct {
		result ctrl.Result
		err    error
	}
	tests := []struct {
		name string
		// obj is nil for a resource that is gone.
		obj      func(p *v1alpha1.Package)
		gone     bool
		pass     step
		observed bool
		finalize step
		// statusPatchFails makes every status write fail.
		statusPatchFails bool

		wantResult      ctrl.Result
		wantErr         error
		wantErrAny      bool
		wantPass        bool
		wantFinalize    bool
		wantForgotten   bool
		wantDeleted     bool
		wantFinalizer   bool
		wantObserved    int64
		wantLastHandled string
		// wantReady, wantReconciling and wantStalled are the reasons stored ("" for none).
		wantReady, wantReconciling, wantStalled string
	}{
		{name: "gone: nothing to do, what is kept for it is dropped", gone: true, wantForgotten: true, wantDeleted: true},
		{name: "new: the finalizer is written, then the pass runs in the same reconcile",
			obj: func(p *v1alpha1.Package) { p.Finalizers = nil }, pass: step{result: ctrl.Result{RequeueAfter: time.Hour}}, observed: true,
			wantResult: ctrl.Result{RequeueAfter: time.Hour}, wantPass: true, wantFinalizer: true, wantObserved: 3, wantLastHandled: token},
		{name: "settled: the generation is observed and the request acknowledged",
			pass: step{result: ctrl.Result{RequeueAfter: time.Hour}}, observed: true,
			wantResult: ctrl.Result{RequeueAfter: time.Hour}, wantPass: true, wantFinalizer: true, wantObserved: 3, wantLastHandled: token},
		{name: "not settled: acknowledged, the generation not observed",
			pass: step{result: ctrl.Result{RequeueAfter: time.Second}}, observed: false,
			wantResult: ctrl.Result{RequeueAfter: time.Second}, wantPass: true, wantFinalizer: true, wantObserved: 1, wantLastHandled: token},
		{name: "a failure: reported in Ready, retried at the retry interval (not the work queue's backoff), the generation not observed",
			pass: step{err: errTransient}, observed: true,
			wantResult: ctrl.Result{RequeueAfter: time.Minute}, wantPass: true, wantFinalizer: true, wantObserved: 1, wantLastHandled: token,
			wantReady: v1alpha1.ApplyFailedReason, wantReconciling: v1alpha1.ProgressingWithRetryReason},
		{name: "a failure only a change can help: Stalled, at the interval, the generation observed",
			pass: step{err: &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: errors.New("no")}}, observed: true,
			wantResult: ctrl.Result{RequeueAfter: time.Hour}, wantPass: true, wantFinalizer: true, wantObserved: 3, wantLastHandled: token,
			wantReady: v1alpha1.InvalidSpecReason, wantStalled: v1alpha1.InvalidSpecReason},
		{name: "a deletion that fails: reported and retried the same way",
			obj: func(p *v1alpha1.Package) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, observed: true,
			finalize:   step{err: errTransient},
			wantResult: ctrl.Result{RequeueAfter: time.Minute}, wantFinalize: true, wantFinalizer: true, wantObserved: 1,
			wantReady: v1alpha1.ApplyFailedReason, wantReconciling: v1alpha1.ProgressingWithRetryReason},
		{name: "suspended: no pass, no requeue, the request acknowledged",
			obj: func(p *v1alpha1.Package) { p.Spec.Suspend = true }, observed: true,
			wantFinalizer: true, wantObserved: 3, wantLastHandled: token},
		{name: "deleting: the finalize step alone, its requeue returned, the request not acknowledged",
			obj: func(p *v1alpha1.Package) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, observed: true,
			finalize:   step{result: ctrl.Result{RequeueAfter: 5 * time.Second}},
			wantResult: ctrl.Result{RequeueAfter: 5 * time.Second}, wantFinalize: true, wantFinalizer: true, wantObserved: 3},
		{name: "deleting and done: the finalizer goes, the resource with it",
			obj: func(p *v1alpha1.Package) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, observed: true,
			wantFinalize: true, wantDeleted: true},
		{name: "a status write that fails is returned",
			statusPatchFails: true, pass: step{result: ctrl.Result{RequeueAfter: time.Hour}}, observed: true,
			wantResult: ctrl.Result{RequeueAfter: time.Hour}, wantErrAny: true, wantPass: true, wantFinalizer: true, wantObserved: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scheme := runtime.NewScheme()
			require.NoError(t, v1alpha1.AddToScheme(scheme))
			pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{
				Namespace: "team", Name: "addon", Generation: 3, UID: "uid-1", Finalizers: []string{v1alpha1.FinalizerName},
				Annotations: map[string]string{meta.ReconcileRequestAnnotation: token},
			}}
			pkg.Status.ObservedGeneration = 1
			if tt.obj != nil {
				tt.obj(pkg)
			}
			b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.Package{})
			if !tt.gone {
				b = b.WithObjects(pkg)
			}
			if tt.statusPatchFails {
				b = b.WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
					return errors.New("status write refused")
				}})
			}
			c := b.Build()
			var passed, finalized, forgotten bool
			steps := reconciler.Steps[*v1alpha1.Package]{
				Status:    func(p *v1alpha1.Package) reconciler.CommonStatus { return applier.ApplyCommon(&p.Status.ApplyStatus) },
				Suspended: func(p *v1alpha1.Package) bool { return p.Spec.Suspend },
				Observed:  func(*v1alpha1.Package) bool { return tt.observed },
				Pass: func(_ context.Context, p *v1alpha1.Package, _ *reconciler.Report, lastHandled string) (ctrl.Result, error) {
					passed = true
					assert.Empty(t, lastHandled, "handled before this reconcile")
					assert.True(t, controllerutil.ContainsFinalizer(p, v1alpha1.FinalizerName), "the finalizer is in place before the pass")
					return tt.pass.result, tt.pass.err
				},
				Finalize: func(_ context.Context, p *v1alpha1.Package) (ctrl.Result, error) {
					finalized = true
					if tt.finalize == (step{}) {
						controllerutil.RemoveFinalizer(p, v1alpha1.FinalizerName)
					}
					return tt.finalize.result, tt.finalize.err
				},
				Intervals: func(*v1alpha1.Package) reconciler.Intervals {
					return reconciler.Intervals{Interval: time.Hour, Retry: time.Minute, Progress: time.Second}
				},
				CopyStatus: func(dst, src *v1alpha1.Package) { dst.Status = *src.Status.DeepCopy() },
				Gone:       func(types.NamespacedName) { forgotten = true },
			}
			l := reconciler.New(reconciler.Base{Client: c}, "Package", func() *v1alpha1.Package { return &v1alpha1.Package{} }, steps)
			key := client.ObjectKeyFromObject(pkg)
			res, err := l.Reconcile(t.Context(), ctrl.Request{NamespacedName: key})
			switch {
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
			case tt.wantErrAny:
				require.Error(t, err)
			default:
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantResult, res)
			assert.Equal(t, tt.wantPass, passed, "pass")
			assert.Equal(t, tt.wantFinalize, finalized, "finalize")
			assert.Equal(t, tt.wantForgotten, forgotten, "gone")
			_, kept := l.Written.Pending(key, func(*v1alpha1.Package) bool { return false })
			assert.Equal(t, !tt.wantDeleted && !tt.statusPatchFails, kept, "the status written is remembered")

			var stored v1alpha1.Package
			err = c.Get(t.Context(), key, &stored)
			if tt.wantDeleted {
				assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "the resource is gone: %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantFinalizer, controllerutil.ContainsFinalizer(&stored, v1alpha1.FinalizerName), "finalizer stored")
			assert.Equal(t, tt.wantObserved, stored.Status.ObservedGeneration, "observedGeneration")
			assert.Equal(t, tt.wantLastHandled, stored.Status.LastHandledReconcileAt, "request acknowledged")
			assert.Equal(t, tt.wantReady, conditions.GetReason(&stored, meta.ReadyCondition), "Ready")
			assert.Equal(t, tt.wantReconciling, conditions.GetReason(&stored, meta.ReconcilingCondition), "Reconciling")
			assert.Equal(t, tt.wantStalled, conditions.GetReason(&stored, meta.StalledCondition), "Stalled")
		})
	}
}
