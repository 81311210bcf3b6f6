package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// TestFleetDeletionPolicy: deleting a fleet with deletionPolicy Orphan leaves its members
// installed, Ready and reconciling on their own, with nothing left that ties them (or the
// Secrets copied for them) to the fleet; with Delete (the default) the members, what they
// installed and the copies go with the fleet. Members and copies carry the fleet's UID, and an
// ownerReference to it only with Delete.
func TestFleetDeletionPolicy(t *testing.T) {
	t.Parallel()
	const shard = "fleet-deletion"
	controllerNS := newNamespace(t)
	runShardController(t, shard, func(o *reconciler.Options) { o.Namespace = controllerNS })
	// The suite's registry asks for no credentials: these are copied, and sent to nobody.
	pullConfig := dockerConfig(suite.registry.Host, "anyone", "anything")
	putPullSecret(t, controllerNS, "registry", pullConfig)

	for _, policy := range []v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionOrphan, v1alpha1.FleetDeletionDelete} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			hcNamespace := newNamespace(t)
			digest := pushPackage(t, writePackage(t, fleetPackage("1", false)), "e2e/"+hcNamespace+"/deletion:stable")
			clusters := newFleetClusters(t, hcNamespace, hcNamespace, "", "")
			require.Len(t, clusters, 2)
			labels := map[string]string{shardLabel: shard}
			fleet := &v1alpha1.HostedClusterPackage{
				ObjectMeta: metav1.ObjectMeta{Name: "deletion-" + hcNamespace[len(hcNamespace)-8:], Labels: labels},
				Spec: v1alpha1.HostedClusterPackageSpec{
					HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
					Template: v1alpha1.PackageTemplate{
						Metadata: v1alpha1.TemplateMetadata{Labels: labels},
						Spec: v1alpha1.PackageSpec{Image: suite.registry.Host + "/e2e/" + hcNamespace + "/deletion:stable",
							PullSecretRef: &meta.LocalObjectReference{Name: "registry"}},
					},
				},
			}
			if policy == v1alpha1.FleetDeletionOrphan {
				fleet.Spec.DeletionPolicy = policy
			}
			newFleet(t, fleet)
			waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)
			members := fleetMembers(t, t.Context(), fleet.Name)
			require.Len(t, members, 2)
			for ns, m := range members {
				assert.Equal(t, string(fleet.UID), m.Annotations[v1alpha1.FleetUIDAnnotation], "member %s carries the fleet's UID", ns)
				if policy == v1alpha1.FleetDeletionOrphan {
					assert.Empty(t, m.OwnerReferences, "member %s: no ownerReference with Orphan, which no cascade could delete", ns)
				} else if assert.Len(t, m.OwnerReferences, 1, "member %s", ns) {
					assert.Equal(t, fleet.UID, m.OwnerReferences[0].UID, "member %s is controlled by the fleet", ns)
				}
			}
			for ns := range clusters {
				assertFleetCopy(t, fleet, ns, "registry", corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: pullConfig})
				assert.Equal(t, "1", configMapData(t, ns, "fleet-app")["version"])
			}
			if policy == v1alpha1.FleetDeletionOrphan {
				// The orphans are the test's to delete, while the controller still runs.
				for _, m := range members {
					cleanupObject(t, &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}})
				}
			}

			require.NoError(t, suite.mgmtClient.Delete(t.Context(), fleet))
			eventually(t, func(a *attempt) {
				err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), &v1alpha1.HostedClusterPackage{})
				assert.True(a, apierrors.IsNotFound(err), "fleet gone: %v", err)
			}, "the fleet is gone")

			if policy == v1alpha1.FleetDeletionDelete {
				eventually(t, func(a *attempt) {
					for ns := range clusters {
						err := suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: fleet.Name}, &v1alpha1.Package{})
						assert.True(a, apierrors.IsNotFound(err), "member %s deleted: %v", ns, err)
						assert.False(a, exists(a, suite.mgmtClient, "v1", "ConfigMap", ns, "fleet-app"), "what member %s installed is torn down", ns)
						err = suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: ns, Name: "registry"}, &corev1.Secret{})
						assert.True(a, apierrors.IsNotFound(err), "copy in %s deleted: %v", ns, err)
					}
				}, "the members and the copies go with the fleet")
				return
			}

			for ns, before := range members {
				pkg := &v1alpha1.Package{}
				require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: fleet.Name}, pkg))
				assert.NotContains(t, pkg.Labels, v1alpha1.FleetLabel, "member %s", ns)
				assert.NotContains(t, pkg.Annotations, v1alpha1.FleetRevisionAnnotation, "member %s", ns)
				assert.NotContains(t, pkg.Annotations, "pkgsync.dev/fleet-revision-time", "member %s", ns)
				assert.Empty(t, pkg.OwnerReferences, "member %s is owned by nobody", ns)
				assert.Equal(t, shard, pkg.Labels[shardLabel], "member %s keeps the template's labels", ns)
				assert.Equal(t, before.Spec.Image, pkg.Spec.Image, "member %s keeps its spec: pinned to the digest", ns)
				assert.Equal(t, "1", configMapData(t, ns, "fleet-app")["version"], "what member %s installed stays", ns)

				var copied corev1.Secret
				require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "registry"}, &copied))
				assert.Equal(t, map[string][]byte{corev1.DockerConfigJsonKey: pullConfig}, copied.Data, "the copy in %s stays, for the orphan to pull with", ns)
				assert.NotContains(t, copied.Labels, v1alpha1.FleetLabel)
				assert.Empty(t, copied.OwnerReferences)

				// The orphan reconciles on its own and stays Ready.
				waitForHandledRequest(t, pkg)
				ready := readyCondition(t, pkg)
				if assert.NotNil(t, ready) {
					assert.Equal(t, metav1.ConditionTrue, ready.Status, "orphan %s: %s", ns, ready.Message)
				}
			}
		})
	}
}

// dependentsOf lists the Packages and Secrets with an ownerReference to uid, as the garbage
// collector's graph has them.
func dependentsOf(t testingT, uid types.UID) []client.Object {
	var out []client.Object
	for _, list := range []client.ObjectList{&v1alpha1.PackageList{}, &corev1.SecretList{}} {
		require.NoError(t, suite.mgmtClient.List(t.Context(), list))
		require.NoError(t, apimeta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			for _, ref := range obj.GetOwnerReferences() {
				if ref.UID == uid {
					out = append(out, obj)
				}
			}
			return nil
		}))
	}
	return out
}

// collectGarbage does for a fleet deleted with cascade what kube-controller-manager's garbage
// collector does before the fleet is gone, which envtest, without one, does not: with orphan,
// it takes the fleet's ownerReference off every dependent, then its orphan finalizer off the
// fleet; with foreground, it deletes every dependent (each with the default propagation, as
// for dependents that have none of their own), then takes its foregroundDeletion finalizer
// off (no dependent blocks that: the fleet sets no blockOwnerDeletion). With background it does
// nothing until the fleet is gone (collectDangling). Each write is a patch on a fresh read,
// retried on a conflict, as the collector's are.
func collectGarbage(t *testing.T, fleet *v1alpha1.HostedClusterPackage, cascade metav1.DeletionPropagation) {
	t.Helper()
	finalizer := map[metav1.DeletionPropagation]string{metav1.DeletePropagationOrphan: metav1.FinalizerOrphanDependents,
		metav1.DeletePropagationForeground: metav1.FinalizerDeleteDependents}[cascade]
	if finalizer == "" {
		return
	}
	eventually(t, func(a *attempt) {
		for _, obj := range dependentsOf(a, fleet.UID) {
			if cascade == metav1.DeletePropagationForeground {
				assert.NoError(a, client.IgnoreNotFound(suite.mgmtClient.Delete(a.Context(), obj)))
				continue
			}
			patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
			obj.SetOwnerReferences(slices.DeleteFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == fleet.UID }))
			assert.NoError(a, client.IgnoreNotFound(suite.mgmtClient.Patch(a.Context(), obj, patch)))
		}
		if cascade == metav1.DeletePropagationOrphan {
			assert.Empty(a, dependentsOf(a, fleet.UID), "every dependent orphaned")
		}
	}, "the garbage collector's part: the dependents (%s)", cascade)
	eventually(t, func(a *attempt) {
		got := &v1alpha1.HostedClusterPackage{}
		err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), got)
		if apierrors.IsNotFound(err) || !assert.NoError(a, err) || !slices.Contains(got.Finalizers, finalizer) {
			return
		}
		patch := client.MergeFromWithOptions(got.DeepCopy(), client.MergeFromWithOptimisticLock{})
		got.Finalizers = slices.DeleteFunc(got.Finalizers, func(f string) bool { return f == finalizer })
		assert.NoError(a, client.IgnoreNotFound(suite.mgmtClient.Patch(a.Context(), got, patch)))
	}, "the garbage collector's part: its finalizer %s off the fleet", finalizer)
}

// collectDangling deletes what still has an ownerReference to a fleet that is gone, as the
// garbage collector does whatever the cascade was.
func collectDangling(t *testing.T, fleet *v1alpha1.HostedClusterPackage) {
	t.Helper()
	for _, obj := range dependentsOf(t, fleet.UID) {
		require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(t.Context(), obj)))
	}
}

// setFleetShard moves the fleet to another controller's shard, or back: the test's controller
// stops seeing it (its cache drops objects that leave its label selector), as if it were
// down, and sees it again when it comes back.
func setFleetShard(t *testing.T, fleet *v1alpha1.HostedClusterPackage, shard string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, shardLabel, shard)
	require.NoError(t, suite.mgmtClient.Patch(t.Context(), fleet.DeepCopy(), client.RawPatch(types.MergePatchType, patch)))
}

// TestFleetDeletionUnderCascade: each deletionPolicy under each kubectl delete --cascade on the
// bare management plane, with the garbage collector's part played by the test (envtest runs
// none), in two orders: the collector first, while pkgsync does not see the fleet (a controller
// down or busy: the collector has stripped or deleted the dependents before the fleet's
// finalizer runs), and both at once. The outcome is cascadeFleet's (assertDeleted) either way.
// TestFleetDeletionCascades runs the same with the real collector.
func TestFleetDeletionUnderCascade(t *testing.T) {
	t.Parallel()
	const shard = "fleet-cascade"
	cc := &cascadeCluster{c: suite.mgmtClient, wait: timeout, shard: map[string]string{shardLabel: shard}, controllerNS: newNamespace(t),
		namespace: newNamespace, cleanup: cleanupObject}
	cc.hostedClusters = func(t *testing.T, n int) (map[string]string, []string) {
		hcNamespace := newNamespace(t)
		var hcps []string
		for ns := range newFleetClusters(t, hcNamespace, hcNamespace, slices.Repeat([]string{""}, n)...) {
			hcps = append(hcps, ns)
		}
		return map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}, hcps
	}
	cc.createFleet = func(t *testing.T, fleet *v1alpha1.HostedClusterPackage) { newFleet(t, fleet) }
	runShardController(t, shard, func(o *reconciler.Options) { o.Namespace = cc.controllerNS })

	for _, policy := range []v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionDelete, v1alpha1.FleetDeletionOrphan} {
		for _, cascade := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
			for _, gcFirst := range []bool{true, false} {
				order := map[bool]string{true: "collector-first", false: "together"}[gcFirst]
				t.Run(fmt.Sprintf("%s/%s/%s", policy, cascade, order), func(t *testing.T) {
					t.Parallel()
					cf := cc.newCascadeFleet(t, policy)
					if gcFirst {
						setFleetShard(t, cf.fleet, shard+"-paused")
					}
					require.NoError(t, suite.mgmtClient.Delete(t.Context(), cf.fleet, client.PropagationPolicy(cascade)))
					collectGarbage(t, cf.fleet, cascade)
					if gcFirst {
						setFleetShard(t, cf.fleet, shard)
					}
					cf.waitGone(t)
					collectDangling(t, cf.fleet)
					cf.assertDeleted(t, cascade)
				})
			}
		}
	}
}
