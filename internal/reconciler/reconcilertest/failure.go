package reconcilertest

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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// The intervals of every resource under RunFailures: the controller's retry and progress
// intervals (FailureOptions), and each resource's own interval.
const (
	FailureRetry    = 7 * time.Second
	FailureProgress = 3 * time.Second
	FailureInterval = time.Hour
)

// FailureKind is one kind under RunFailures: Build makes a resource of the kind that fails as
// fc says (generation 2, generation 1 observed, pkgsync's finalizer: SetFailingMeta), a fake
// management cluster holding it with the requests funcs intercepts, and the kind's reconciler
// (its own steps in the shared lifecycle) on that cluster.
type FailureKind struct {
	Name  string
	Build func(t *testing.T, fc FailureCase, funcs interceptor.Funcs) (client.Object, client.Client, reconcile.Reconciler)
}

// FailureCase is how a resource fails.
type FailureCase int

const (
	// FailRetried: a pass fails in a way that trying again can mend.
	FailRetried FailureCase = iota
	// FailStalled: a pass fails in a way only a change of spec can mend.
	FailStalled
	// FailDeletion: the deletion step fails.
	FailDeletion
	// FailStatusWrite: a pass fails, and so does the status write that would report it.
	FailStatusWrite
)

var failureNames = map[FailureCase]string{FailRetried: "retried", FailStalled: "stalled", FailDeletion: "deletion fails", FailStatusWrite: "status write fails"}

// Retried is what a failure that is tried again leaves: Ready=False with reason, and
// Reconciling=ProgressingWithRetry.
func Retried(reason string) Conditions {
	return Conditions{Ready: metav1.ConditionFalse, ReadyReason: reason, ReconcilingReason: v1alpha1.ProgressingWithRetryReason}
}

// Stalled is what a failure only a change of spec can mend leaves: Ready=False and Stalled,
// both with reason.
func Stalled(reason string) Conditions {
	return Conditions{Ready: metav1.ConditionFalse, ReadyReason: reason, StalledBy: reason}
}

// RunFailures checks the one rule for what follows a failure, which every kind follows: a
// pass or a deletion step that fails leaves Ready=False with the reason its error maps to, and
// either Reconciling=ProgressingWithRetry, coming back after the retry interval, or Stalled,
// coming back after the interval; neither goes to the work queue. A retried failure does not
// observe the generation; a stall does. Only a status write that fails, which status cannot
// report, goes to the work queue (its backoff). want is what each case leaves of the
// conditions (FailStatusWrite: none, nothing is written).
func RunFailures(t *testing.T, kind FailureKind, want map[FailureCase]Conditions) {
	t.Helper()
	for fc, want := range want {
		t.Run(kind.Name+"/"+failureNames[fc], func(t *testing.T) {
			t.Parallel()
			var funcs interceptor.Funcs
			if fc == FailStatusWrite {
				funcs.SubResourcePatch = func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
					return apierrors.NewServiceUnavailable("etcd is down")
				}
			}
			obj, c, r := kind.Build(t, fc, funcs)
			res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})

			stored := obj.DeepCopyObject().(reconciler.Object)
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(obj), stored))
			generation := observedGeneration(t, stored)
			if fc == FailStatusWrite {
				assert.True(t, apierrors.IsServiceUnavailable(err), "returned to the work queue: %v", err)
				assert.Nil(t, conditions.Get(stored, meta.ReadyCondition), "nothing written")
				return
			}
			require.NoError(t, err, "a failure is reported in status, not returned to the work queue")
			AssertConditions(t, stored, want)
			assert.NotEmpty(t, conditions.GetMessage(stored, meta.ReadyCondition), "Ready says what failed")
			if fc == FailStalled {
				assert.Equal(t, ctrl.Result{RequeueAfter: FailureInterval}, res, "a stall comes back after the interval")
				assert.Equal(t, int64(2), generation, "a stall is the generation's outcome")
				return
			}
			assert.Equal(t, ctrl.Result{RequeueAfter: FailureRetry}, res, "a retried failure comes back after the retry interval")
			assert.Equal(t, int64(1), generation, "a retried failure is not the generation's outcome")
		})
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

// SetFailingMeta gives obj the metadata of a resource under RunFailures: namespace "team" for
// namespaced kinds, and deleted for FailDeletion.
func SetFailingMeta(obj client.Object, namespaced bool, fc FailureCase) {
	obj.SetName("addon")
	obj.SetGeneration(2)
	obj.SetUID("uid-1")
	obj.SetFinalizers([]string{v1alpha1.FinalizerName})
	if namespaced {
		obj.SetNamespace("team")
	}
	if fc == FailDeletion {
		obj.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	}
}

// UnreadableInventory is an inventory entry the controller cannot read: a pass or teardown
// that reads it fails, and trying again can mend it (nothing stalls on it).
func UnreadableInventory() *v1alpha1.Inventory {
	return &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{{Name: "deploy", Objects: []string{"not-an-id"}}}}
}

// FailureOptions are the controller's options under RunFailures.
func FailureOptions(namespace string) reconciler.Options {
	return reconciler.Options{Namespace: namespace, RetryInterval: FailureRetry, ProgressInterval: FailureProgress, HostedTeardownTimeout: time.Hour}
}

// ApplyKindClient is a fake management cluster for the kinds that apply objects, holding objs
// and intercepting requests with funcs; the caller adds the indexes its kind lists by.
func ApplyKindClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *fake.ClientBuilder {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).
		WithStatusSubresource(&v1alpha1.Package{}, &v1alpha1.ClusterPackage{}, &v1alpha1.ObjectDeployment{}, &v1alpha1.ClusterObjectDeployment{})
}
