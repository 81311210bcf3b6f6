package applier

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// TestTeardownFailureIsRetried: a teardown pass that fails returns its error, saying that it
// happened while deleting, and the lifecycle concludes it through the one outcome mapping
// (failure), as every failure that is tried again: Ready=False with the failure's reason,
// Reconciling=ProgressingWithRetry, no Stalled left from before the deletion.
func TestTeardownFailureIsRetried(t *testing.T) {
	t.Parallel()
	obj := &v1alpha1.ClusterPackage{}
	obj.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	reconciler.MarkOutcome(obj, reconciler.Outcome{State: reconciler.OutcomeStalled, Reason: v1alpha1.RenderFailedReason, Message: "before the deletion"})
	status := &obj.Status.ApplyStatus
	status.Inventory = &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{{Name: "deploy", Objects: []string{"not-an-id"}}}}

	waiting, err := teardownPass(t.Context(), &Applier{}, nil, obj, apply.Owner{Kind: v1alpha1.ClusterPackageKind, Name: "p"}, "", status, reconciler.Options{}.WithDefaults())
	require.Error(t, err)
	assert.Nil(t, waiting)
	reconciler.MarkOutcome(obj, reconciler.Failure(err))
	ready := conditions.Get(obj, meta.ReadyCondition)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.ApplyFailedReason, ready.Reason)
	assert.Contains(t, ready.Message, "deleting: ")
	assert.Equal(t, v1alpha1.ProgressingWithRetryReason, conditions.GetReason(obj, meta.ReconcilingCondition))
	assert.False(t, conditions.Has(obj, meta.StalledCondition))
}

// TestFinalize: one deletion pass of a resource that applies objects, in each state its
// inventory, its objects and its namespace can be in: what is deleted, what is let go, when
// the pass comes back and whether the finalizer goes.
func TestFinalize(t *testing.T) {
	t.Parallel()
	const ns = "team"
	owner := apply.Owner{Kind: "Package", Namespace: ns, Name: "addon"}
	owned := map[string]string{apply.LabelOwnerKind: "Package", apply.LabelOwnerNamespace: ns, apply.LabelOwnerName: "addon"}
	cm := func(name string, mutate ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: owned}}
		for _, m := range mutate {
			m(c)
		}
		return c
	}
	ref := func(name string) apply.ObjectRef {
		return apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	inventory := func(class string, names ...string) *v1alpha1.Inventory {
		ph := apply.InventoryPhase{Name: "config", Class: class}
		for _, n := range names {
			ph.Objects = append(ph.Objects, ref(n))
		}
		return inventoryToStatus(apply.Inventory{Phases: []apply.InventoryPhase{ph}})
	}
	live := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	forbidDeletes := interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", nil)
	}}
	const progress, retry = 3 * time.Second, 20 * time.Second

	tests := []struct {
		name        string
		noFinalizer bool
		inventory   *v1alpha1.Inventory
		objects     []client.Object
		funcs       *interceptor.Funcs

		wantResult    ctrl.Result
		wantErr       bool
		wantFinalizer bool
		wantGone      []string // ConfigMaps deleted
		wantLeft      []string // ConfigMaps still there
		wantReady     string   // Ready reason, "" for none
		wantEvent     string   // a substring of the one event, "" for none
	}{
		{name: "not pkgsync's (no finalizer): nothing", noFinalizer: true, inventory: inventory("", "a"), objects: []client.Object{live, cm("a")},
			wantLeft: []string{"a"}},
		{name: "no inventory: the finalizer goes", objects: []client.Object{live},
			wantFinalizer: false},
		{name: "objects that go at once: deleted, the finalizer goes in the same pass", inventory: inventory("", "a", "b"), objects: []client.Object{live, cm("a"), cm("b")},
			wantGone: []string{"a", "b"}},
		{name: "an object no longer ours is left alone", inventory: inventory("", "a"),
			objects:  []client.Object{live, cm("a", func(c *corev1.ConfigMap) { c.Labels = nil })},
			wantLeft: []string{"a"}},
		{name: "an object with a finalizer of its own: deleted, waited for at the progress interval", inventory: inventory("", "a"),
			objects:    []client.Object{live, cm("a", func(c *corev1.ConfigMap) { c.Finalizers = []string{"example.com/hold"} })},
			wantResult: ctrl.Result{RequeueAfter: progress}, wantFinalizer: true, wantLeft: []string{"a"}, wantReady: v1alpha1.DeletingReason},
		{name: "deletion refused in a live namespace: the error (for the lifecycle to report), the finalizer stays", inventory: inventory("", "a"), objects: []client.Object{live, cm("a")}, funcs: &forbidDeletes,
			wantErr: true, wantFinalizer: true, wantLeft: []string{"a"}, wantReady: v1alpha1.ForbiddenReason},
		{name: "deletion refused in a terminating namespace: let go, the finalizer goes", inventory: inventory("", "a"), objects: []client.Object{terminating, cm("a")}, funcs: &forbidDeletes,
			wantLeft: []string{"a"}, wantEvent: "let 1 object(s) go"},
		{name: "deletion refused, the namespace gone: let go", inventory: inventory("", "a"), objects: []client.Object{cm("a")}, funcs: &forbidDeletes,
			wantLeft: []string{"a"}, wantEvent: "let 1 object(s) go"},
		{name: "hosted objects of a namespace no HostedCluster maps to: let go without a request", inventory: inventory(v1alpha1.ClassHostedCluster, "a"), objects: []client.Object{live},
			wantEvent: "let 1 object(s) go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scheme := runtime.NewScheme()
			require.NoError(t, clientgoscheme.AddToScheme(scheme))
			require.NoError(t, v1alpha1.AddToScheme(scheme))
			// The cases share objects (the live Namespace); the fake client writes into what it is given.
			objects := make([]client.Object, 0, len(tt.objects))
			for _, o := range tt.objects {
				objects = append(objects, o.DeepCopyObject().(client.Object))
			}
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...)
			if tt.funcs != nil {
				b = b.WithInterceptorFuncs(*tt.funcs)
			}
			c := b.Build()
			recorder := record.NewFakeRecorder(10)
			r := &Applier{
				engine:    apply.NewEngine(apply.Options{}),
				Targets:   &Targets{Management: c},
				Reader:    c,
				APIReader: c,
				Metrics:   reconciler.NewMetrics(),
				Recorder:  recorder,
			}
			pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addon", Finalizers: []string{v1alpha1.FinalizerName},
				DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
			if tt.noFinalizer {
				pkg.Finalizers = nil
			}
			pkg.Status.Inventory = tt.inventory
			opts := reconciler.Options{ProgressInterval: progress, RetryInterval: retry, HostedTeardownTimeout: time.Hour}

			res, err := finalize(t.Context(), r, c, pkg, owner, "", &pkg.Status.ApplyStatus, opts)
			if tt.wantErr {
				require.Error(t, err)
				// What the lifecycle reports of it (lifecycle.failed).
				reconciler.MarkOutcome(pkg, reconciler.Failure(err))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantResult, res)
			assert.Equal(t, tt.wantFinalizer, controllerutil.ContainsFinalizer(pkg, v1alpha1.FinalizerName), "finalizer")
			for _, name := range tt.wantGone {
				err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
				assert.True(t, apierrors.IsNotFound(err), "%s deleted: %v", name, err)
			}
			for _, name := range tt.wantLeft {
				var got corev1.ConfigMap
				require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &got), "%s left", name)
			}
			assert.Equal(t, tt.wantReady, conditions.GetReason(pkg, meta.ReadyCondition), "Ready")
			if tt.wantReady == v1alpha1.DeletingReason {
				assert.Equal(t, v1alpha1.DeletingReason, conditions.GetReason(pkg, meta.ReconcilingCondition))
				assert.Equal(t, "Deleting config", pkg.Status.Phase)
				assert.NotNil(t, pkg.Status.Inventory, "what is left stays in the inventory")
			}
			select {
			case e := <-recorder.Events:
				assert.True(t, tt.wantEvent != "" && strings.Contains(e, tt.wantEvent), "event %q, want %q", e, tt.wantEvent)
			default:
				assert.Empty(t, tt.wantEvent, "no event")
			}
		})
	}
}

// TestHostedTeardownWait: a teardown held by an unreachable hosted cluster comes back at the
// cluster's next probe (never sooner than the retry interval) and at the latest when the
// teardown timeout lets its objects go.
func TestHostedTeardownWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	opts := reconciler.Options{RetryInterval: 30 * time.Second, HostedTeardownTimeout: 2 * time.Minute}
	tests := []struct {
		name      string
		nextProbe time.Duration // from now
		deleted   time.Duration // before now
		want      time.Duration
	}{
		{"a probe soon: the retry interval", 5 * time.Second, 0, 30 * time.Second},
		{"a probe after the retry interval: the probe", time.Minute, 0, time.Minute + time.Second},
		{"a probe after the timeout: the timeout", 10 * time.Minute, 0, 2*time.Minute + time.Second},
		{"the timeout close: the timeout, sooner than the retry", 10 * time.Minute, 110 * time.Second, 11 * time.Second},
		{"the timeout passed: the probe", time.Minute, 5 * time.Minute, time.Minute + time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, hostedTeardownWait(now.Add(tt.nextProbe), now.Add(-tt.deleted), now, opts), tt.name)
	}
}
