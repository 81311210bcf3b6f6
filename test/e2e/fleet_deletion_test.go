package e2e

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/controller"
)

// TestFleetDeletionPolicy: deleting a fleet with deletionPolicy Orphan leaves its members
// installed, Ready and reconciling on their own, with nothing left that ties them (or the
// Secrets copied for them) to the fleet; with Delete (the default) the members, what they
// installed and the copies go with the fleet.
func TestFleetDeletionPolicy(t *testing.T) {
	const shard = "fleet-deletion"
	controllerNS := newNamespace(t)
	runShardController(t, shard, func(o *controller.Options) { o.Namespace = controllerNS })
	// The suite's registry asks for no credentials: these are copied, and sent to nobody.
	pullConfig := dockerConfig(suite.registry.Host, "anyone", "anything")
	putPullSecret(t, controllerNS, "registry", pullConfig)

	for _, policy := range []v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionOrphan, v1alpha1.FleetDeletionDelete} {
		t.Run(string(policy), func(t *testing.T) {
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
