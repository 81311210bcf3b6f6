package e2e

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestFleetEdgeCases: a selector that matches nothing is Ready with 0 members; a Package of the
// member's name that is not the fleet's is left alone and reported; a template that fails for
// one cluster fails that member only and halts the rollout with its reason.
func TestFleetEdgeCases(t *testing.T) {
	t.Parallel()
	registry := suite.registry.Host
	hcNamespace := newNamespace(t)
	repo := "fleet-edge/" + hcNamespace
	digest := pushPackageTo(t, writePackage(t, fleetPackage("1", false)), registry+"/"+repo+":v1")

	t.Run("nothing selected", func(t *testing.T) {
		t.Parallel()
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "empty-" + hcNamespace[len(hcNamespace)-8:]},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": "nobody"}},
				Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1"}},
			},
		}
		newFleet(t, fleet)
		got := waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)
		assert.Contains(t, conditions.GetMessage(got, meta.ReadyCondition), "0 members")
	})

	t.Run("collision", func(t *testing.T) {
		t.Parallel()
		clusters := newFleetClusters(t, hcNamespace, hcNamespace, "a", "a")
		name := "edge-" + hcNamespace[len(hcNamespace)-8:]
		var taken string
		for ns := range clusters {
			taken = ns
			break
		}
		theirs := &v1alpha1.Package{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: taken, Labels: map[string]string{"owner": "someone-else"}},
			Spec:       v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1", Suspend: true},
		}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), theirs))
		t.Cleanup(func() { deleteAndWait(t, theirs) })
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
				Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1"}},
			},
		}
		newFleet(t, fleet)
		got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, "MembersFailed", digest)
		require.Len(t, got.Status.FailedMembers, 1)
		assert.Equal(t, taken, got.Status.FailedMembers[0].Namespace)
		assert.Equal(t, v1alpha1.CollisionReason, got.Status.FailedMembers[0].Reason)
		assert.Equal(t, int32(1), got.Status.Total, "the other cluster has its member")
		still := &v1alpha1.Package{}
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(theirs), still))
		assert.Equal(t, theirs.Spec.Image, still.Spec.Image, "not overwritten")
		assert.NotContains(t, still.Labels, v1alpha1.FleetLabel)
	})

	t.Run("a template that fails for one cluster fails that member only", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		clusters := newFleetClusters(t, ns, ns, "with-tier", "without-tier")
		for cp, hc := range clusters {
			if hc.GetLabels()["rollout-wave"] == "with-tier" {
				hc.SetLabels(map[string]string{"e2e.pkgsync.dev/fleet": ns, "rollout-wave": "with-tier", "tier": "gold"})
				require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))
				clusters[cp] = hc
			}
		}
		files := fleetPackage("1", false)
		files["config.yaml.gotmpl"] = `apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-app
  annotations:
    pkgsync.dev/phase: config
data:
  tier: {{ with index .environment.hyperShift.hostedCluster.metadata.labels "tier" }}{{ . | quote }}{{ else }}{{ fail "the HostedCluster needs a tier label" }}{{ end }}
`
		all := intstr.FromString("100%")
		tierDigest := pushPackageTo(t, writePackage(t, files), registry+"/"+repo+":tier")
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "tier-" + ns[len(ns)-8:]},
			Spec: v1alpha1.HostedClusterPackageSpec{
				HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": ns}},
				Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":tier"}},
				Rollout:               v1alpha1.FleetRolloutStrategy{MaxUnavailable: &all},
			},
		}
		newFleet(t, fleet)
		got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, "RolloutHalted", tierDigest)
		require.Len(t, got.Status.FailedMembers, 1)
		failed := got.Status.FailedMembers[0]
		assert.Equal(t, v1alpha1.RenderFailedReason, failed.Reason)
		assert.Contains(t, failed.Message, "the HostedCluster needs a tier label")
		assert.Equal(t, "without-tier", clusters[failed.Namespace].GetLabels()["rollout-wave"])
		eventually(t, func(a *attempt) {
			for cp, hc := range clusters {
				if hc.GetLabels()["rollout-wave"] != "with-tier" {
					continue
				}
				cm := &corev1.ConfigMap{}
				if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKey{Namespace: cp, Name: "fleet-app"}, cm)) {
					assert.Equal(a, "gold", cm.Data["tier"])
				}
			}
		})
	})

	t.Run("invalid rollout refused at admission", func(t *testing.T) {
		t.Parallel()
		zero := intstr.FromString("0%")
		fleet := &v1alpha1.HostedClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "invalid-" + hcNamespace[len(hcNamespace)-8:]},
			Spec: v1alpha1.HostedClusterPackageSpec{
				Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: registry + "/" + repo + ":v1"}},
				Rollout:  v1alpha1.FleetRolloutStrategy{MaxUnavailable: &zero},
			},
		}
		err := suite.mgmtClient.Create(t.Context(), fleet)
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "%v", err)
		assert.Contains(t, err.Error(), "spec.rollout.maxUnavailable must be a count of at least 1 or a percentage from 1% to 100%")

		fleet.Spec.Rollout = v1alpha1.FleetRolloutStrategy{}
		fleet.Spec.Template.Spec = v1alpha1.PackageSpec{Image: registry + "/" + repo, Semver: ">=1.0.0"}
		err = suite.mgmtClient.Create(t.Context(), fleet)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.template.spec.semver is not supported by a HostedClusterPackage yet")
	})
}
