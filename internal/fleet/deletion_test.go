package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/verify"
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
)

// deletingFleet is fleetOn's fleet being deleted with policy, as kubectl delete --cascade=orphan
// leaves it: the garbage collector's orphan finalizer beside pkgsync's.
func deletingFleet(policy v1alpha1.FleetDeletionPolicy) *v1alpha1.HostedClusterPackage {
	fleet := fleetOn("example.com/addon:v1", nil, nil)
	fleet.Spec.DeletionPolicy = policy
	fleet.Finalizers = []string{v1alpha1.FinalizerName, metav1.FinalizerOrphanDependents}
	fleet.DeletionTimestamp = ptr.To(metav1.NewTime(time.Now().Truncate(time.Second)))
	return fleet
}

// fleetObjects are what a fleet "addon" (UID fleet-uid) finds labelled with its name when it is
// deleted: its own (a member and a copy whose ownerReference the garbage collector took off,
// or that the fleet wrote without one, carrying its UID in pkgsync.dev/fleet-uid; a member and
// a copy written by an older pkgsync, with only the ownerReference) and the decoys, which are
// not its own whatever their label, name and namespace say (a tenant's Package and Secret
// labelled with the fleet, the Secret with a guessed UID; a labelled Package of the fleet's name
// and a labelled Secret in a selected cluster's namespace that the fleet did not write).
func fleetObjects() (own, decoys []client.Object) {
	fleetLabel := map[string]string{v1alpha1.FleetLabel: "addon"}
	withUID := func(m map[string]string) map[string]string {
		m[v1alpha1.FleetUIDAnnotation] = "fleet-uid"
		return m
	}
	revision := func() map[string]string {
		return map[string]string{v1alpha1.FleetRevisionAnnotation: "abc-def", v1alpha1.FleetRevisionTimeAnnotation: "2026-01-01T00:00:00Z"}
	}
	owner := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind, Name: "addon", UID: "fleet-uid", Controller: ptr.To(true)}}
	pkg := func(ns string, annotations map[string]string, refs []metav1.OwnerReference) *v1alpha1.Package {
		return &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addon", Labels: map[string]string{v1alpha1.FleetLabel: "addon", "team": "a"},
			Annotations: annotations, OwnerReferences: refs}}
	}
	secret := func(ns string, annotations map[string]string, refs []metav1.OwnerReference) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull", Labels: fleetLabel, Annotations: annotations, OwnerReferences: refs},
			Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	}
	own = []client.Object{
		pkg("clusters-a", withUID(revision()), nil), secret("clusters-a", withUID(map[string]string{}), nil),
		pkg("clusters-b", revision(), owner), secret("clusters-b", nil, owner),
	}
	guessed := map[string]string{v1alpha1.FleetUIDAnnotation: "00000000-0000-0000-0000-000000000000"}
	decoys = []client.Object{
		pkg("tenant", nil, nil), secret("tenant", guessed, nil),
		pkg("clusters-c", revision(), nil), secret("clusters-c", nil, nil),
	}
	return own, decoys
}

// collectorWrites makes the first patch of each object conflict, as when the garbage collector
// (or the member's own controller) writes it between the fleet's read and its patch: the
// object is changed (its resourceVersion moves) just before the patch is sent. It returns the
// number of patches sent.
func collectorWrites() (interceptor.Funcs, func() int) {
	var mu sync.Mutex
	seen := map[client.ObjectKey]bool{}
	patches := 0
	return interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		mu.Lock()
		first := !seen[client.ObjectKeyFromObject(obj)]
		seen[client.ObjectKeyFromObject(obj)] = true
		patches++
		mu.Unlock()
		if first {
			current := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err == nil {
				anns := current.GetAnnotations()
				if anns == nil {
					anns = map[string]string{}
				}
				anns["test.pkgsync.dev/written-meanwhile"] = "yes"
				current.SetAnnotations(anns)
				if err := c.Update(ctx, current); err != nil {
					return err
				}
			}
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}, func() int { mu.Lock(); defer mu.Unlock(); return patches }
}

// TestFleetFinalizeFindsItsOwn: a fleet being deleted finds its members and copies by its UID,
// whether or not they still have an ownerReference to it (the garbage collector takes it off
// under kubectl delete --cascade=orphan; the fleet sets none with deletionPolicy Orphan), and
// only them: the decoys are never written, released or deleted. Delete deletes the members,
// then the copies; Orphan releases both, every one whole (label, annotations, ownerReference in
// one write) although each first write conflicts with another writer; then the fleet's
// finalizer goes, and the collector's stays.
func TestFleetFinalizeFindsItsOwn(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	for _, policy := range []v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionDelete, v1alpha1.FleetDeletionOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			own, decoys := fleetObjects()
			fleet := deletingFleet(policy)
			funcs, _ := collectorWrites()
			r, c := f.stepsWith(t, &funcs, append(append([]client.Object{fleet}, own...), decoys...)...)
			before := map[client.ObjectKey]string{}
			for _, d := range decoys {
				require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(d), d))
				before[client.ObjectKeyFromObject(d)] = d.GetResourceVersion()
			}

			var res ctrl.Result
			for pass := 0; pass < 3; pass++ {
				got := &v1alpha1.HostedClusterPackage{}
				require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(fleet), got))
				var err error
				res, err = r.finalize(t.Context(), got)
				require.NoError(t, err, "pass %d", pass)
				if res.IsZero() {
					break
				}
			}
			assert.True(t, res.IsZero(), "done within three passes")

			for _, o := range own {
				now := o.DeepCopyObject().(client.Object)
				err := c.Get(t.Context(), client.ObjectKeyFromObject(o), now)
				if policy == v1alpha1.FleetDeletionDelete {
					assert.True(t, apierrors.IsNotFound(err), "%T %s deleted: %v", o, client.ObjectKeyFromObject(o), err)
					continue
				}
				if assert.NoError(t, err, "%T %s kept", o, client.ObjectKeyFromObject(o)) {
					assertReleasedFrom(t, fleet, now)
					if p, ok := now.(*v1alpha1.Package); ok {
						assert.Equal(t, "a", p.Labels["team"], "the member %s keeps its other labels", p.Namespace)
					}
				}
			}
			for _, d := range decoys {
				now := d.DeepCopyObject().(client.Object)
				if assert.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(d), now), "decoy %T %s kept", d, client.ObjectKeyFromObject(d)) {
					assert.Equal(t, before[client.ObjectKeyFromObject(d)], now.GetResourceVersion(), "decoy %T %s not written", d, client.ObjectKeyFromObject(d))
				}
			}
			got := &v1alpha1.HostedClusterPackage{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(fleet), got), "the collector's finalizer holds the fleet")
			assert.Equal(t, []string{metav1.FinalizerOrphanDependents}, got.Finalizers, "pkgsync's finalizer gone, the collector's left to it")
		})
	}
}

// TestFleetFinalizerBesideTheCollector: the garbage collector takes its orphan finalizer off
// the fleet while pkgsync takes its own off. The API server refuses a write that puts a
// finalizer back on an object being deleted, and a merge patch of the finalizers read before
// the collector's write would do that: pkgsync's goes in a write guarded by the fleet's
// resourceVersion, retried on a fresh read, and the fleet is gone after one reconcile.
func TestFleetFinalizerBesideTheCollector(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	fleet := deletingFleet(v1alpha1.FleetDeletionOrphan)
	collected := false
	funcs := interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*v1alpha1.HostedClusterPackage); ok && !collected {
			// The collector's write lands first.
			collected = true
			current := &v1alpha1.HostedClusterPackage{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
				return err
			}
			controllerutil.RemoveFinalizer(current, metav1.FinalizerOrphanDependents)
			if err := c.Update(ctx, current); err != nil {
				return err
			}
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
	r, c := f.stepsWith(t, &funcs, fleet)
	l := reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(10)}, v1alpha1.HostedClusterPackageKind,
		func() *v1alpha1.HostedClusterPackage { return &v1alpha1.HostedClusterPackage{} }, r.steps())
	_, err := l.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fleet)})
	require.NoError(t, err)
	assert.True(t, collected, "the collector wrote in between")
	err = c.Get(t.Context(), client.ObjectKeyFromObject(fleet), &v1alpha1.HostedClusterPackage{})
	assert.True(t, apierrors.IsNotFound(err), "the fleet is gone, no finalizer put back: %v", err)
}

// assertReleasedFrom checks that obj carries nothing of the fleet: label, annotations,
// ownerReference.
func assertReleasedFrom(t *testing.T, fleet *v1alpha1.HostedClusterPackage, obj client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	assert.NotContains(t, obj.GetLabels(), v1alpha1.FleetLabel, "%T %s", obj, key)
	for _, a := range []string{v1alpha1.FleetUIDAnnotation, v1alpha1.FleetRevisionAnnotation, v1alpha1.FleetRevisionTimeAnnotation} {
		assert.NotContains(t, obj.GetAnnotations(), a, "%T %s", obj, key)
	}
	for _, ref := range obj.GetOwnerReferences() {
		assert.NotEqual(t, fleet.UID, ref.UID, "%T %s still owned by the fleet", obj, key)
	}
}

// stepsWith is steps with the fleet's Secret copier (the controller's namespace is
// controllerNamespace) and, when funcs is given, the client's requests intercepted.
func (f *fleetFixture) stepsWith(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) (*fleetSteps, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	objs = append(append(objs, f.pullSecret), f.Objects...)
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(verifytest.Copies(objs)...).WithStatusSubresource(&v1alpha1.HostedClusterPackage{}).
		WithIndex(&v1alpha1.HostedClusterPackage{}, fleetDependsOnIndex, indexFleetDependsOn)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	c := b.Build()
	return &fleetSteps{
		client: c, apiReader: c, source: f.Src, verifier: verify.NewVerifier(c, c, verifytest.ControllerNamespace, false),
		recorder: record.NewFakeRecorder(10), own: reconciler.NewMetrics(), hostedClusterAPI: true, now: time.Now,
		options:  reconciler.Options{Namespace: verifytest.ControllerNamespace, RetryInterval: 7 * time.Second, ProgressInterval: 3 * time.Second},
		analyses: newAnalyses(nil),
		secrets:  &fleetSecrets{client: c, apiReader: c, copies: c, namespace: verifytest.ControllerNamespace},
	}, c
}
