package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
)

// inlineObject encodes an object for an ObjectDeployment phase.
func inlineObject(t *testing.T, u map[string]any) v1alpha1.ObjectSetObject {
	t.Helper()
	raw, err := (&unstructured.Unstructured{Object: u}).MarshalJSON()
	require.NoError(t, err)
	return v1alpha1.ObjectSetObject{Object: runtime.RawExtension{Raw: raw}}
}

func inlineConfigMap(t *testing.T, namespace, name string) v1alpha1.ObjectSetObject {
	t.Helper()
	return inlineObject(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": namespace}, "data": map[string]any{"name": name}})
}

// TestClusterObjectDeployment: the cluster-scoped ObjectDeployment creates cluster-scoped
// objects and objects in any namespace, labels them as its own, prunes what leaves its spec,
// refuses hosted-cluster phases (it has no hosted-control-plane namespace), and tears
// everything down when deleted.
func TestClusterObjectDeployment(t *testing.T) {
	t.Parallel()
	target := newNamespace(t)
	name := "e2e-cod-" + target
	clusterRole := inlineObject(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": name},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}}})
	cod := &v1alpha1.ClusterObjectDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ObjectDeploymentSpec{Template: v1alpha1.ObjectSetTemplate{Spec: v1alpha1.ObjectSetTemplateSpec{
			Phases: []v1alpha1.ObjectSetPhase{
				{Name: "rbac", Objects: []v1alpha1.ObjectSetObject{clusterRole}},
				{Name: "config", Objects: []v1alpha1.ObjectSetObject{inlineConfigMap(t, target, "kept"), inlineConfigMap(t, target, "dropped")}},
			},
		}}},
	}
	createPackage(t, cod)
	waitForReady(t, cod, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	var cr unstructured.Unstructured
	cr.SetAPIVersion("rbac.authorization.k8s.io/v1")
	cr.SetKind("ClusterRole")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Name: name}, &cr))
	assert.Equal(t, map[string]string{
		apply.LabelOwnerKind: v1alpha1.ClusterObjectDeploymentKind, apply.LabelOwnerNamespace: "", apply.LabelOwnerName: name,
	}, ownerLabels(cr.GetLabels()), "a cluster-scoped owner has an empty namespace")
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "dropped"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var got v1alpha1.ClusterObjectDeployment
		if assert.NoError(ct, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(cod), &got)) && assert.NotEmpty(ct, got.Status.History) {
			assert.Equal(ct, "1", got.Status.History[0].Revision, "the revision is the generation")
		}
	}, timeout, interval)

	t.Run("an object that leaves the spec is pruned", func(t *testing.T) {
		updateObject(t, cod, func() { cod.Spec.Template.Spec.Phases[1].Objects = cod.Spec.Template.Spec.Phases[1].Objects[:1] })
		eventually(t, func(a *attempt) {
			assert.False(a, exists(a, suite.mgmtClient, "v1", "ConfigMap", target, "dropped"))
		})
		waitForReady(t, cod, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "kept"))
	})

	t.Run("hosted-cluster phases are refused", func(t *testing.T) {
		hostedNS := "e2e-cod-hosted-" + target
		hosted := v1alpha1.ObjectSetPhase{
			Name: "hosted", Class: v1alpha1.ClassHostedCluster,
			Objects: []v1alpha1.ObjectSetObject{inlineObject(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": hostedNS}})},
		}
		updateObject(t, cod, func() { cod.Spec.Template.Spec.Phases = append(cod.Spec.Template.Spec.Phases, hosted) })
		cond := waitForReady(t, cod, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason)
		assert.Contains(t, cond.Message, "cluster-scoped resources have no hosted-control-plane namespace")
		assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", hostedNS))
		assert.False(t, exists(t, suite.mgmtClient, "v1", "Namespace", "", hostedNS))
		assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "kept"), "earlier phases stay applied")
	})

	t.Run("deletion tears down", func(t *testing.T) {
		require.NoError(t, suite.mgmtClient.Delete(t.Context(), cod))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			err := suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(cod), &v1alpha1.ClusterObjectDeployment{})
			assert.True(ct, client.IgnoreNotFound(err) == nil && err != nil, "still there: %v", err)
		}, timeout, interval)
		assert.False(t, exists(t, suite.mgmtClient, "rbac.authorization.k8s.io/v1", "ClusterRole", "", name))
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "kept"))
	})
}

// ownerLabels returns the pkgsync ownership labels among labels.
func ownerLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{apply.LabelOwnerKind, apply.LabelOwnerNamespace, apply.LabelOwnerName} {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}
