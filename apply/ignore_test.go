package apply_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// claimsReplicas reports whether manager's entries in the live object claim spec.replicas.
func claimsReplicas(live *unstructured.Unstructured, manager string) bool {
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == manager && mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:replicas"`) {
			return true
		}
	}
	return false
}

func TestIgnoredFieldIsHandedOverAndLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	ignore := []v1alpha1.IgnoreFields{{Group: "apps", Kind: "Deployment", JSONPointers: []string{"/spec/replicas"}}}
	deploy := e.obj(t, deploymentYAML)
	req := apply.Request{Owner: e.owner, Targets: e.targets, IgnoreFields: ignore, DriftPolicy: v1alpha1.DriftReport,
		Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{deploy}}}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	req.Previous = res.Inventory
	live, _ := get(t, e.mgmt, deploy)
	replicas, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	assert.Equal(t, int64(2), replicas, "set on creation")

	// A revision that asks for 5 replicas and changes an annotation: replicas are kept, neither
	// 5 nor reset to the default.
	v2 := e.obj(t, deploymentYAML)
	require.NoError(t, unstructured.SetNestedField(v2.Object, int64(5), "spec", "replicas"))
	v2.SetAnnotations(map[string]string{"example.com/version": "v2"})
	req.Phases[0].Objects[0] = v2
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Updated)
	live, _ = get(t, e.mgmt, deploy)
	replicas, _, _ = unstructured.NestedInt64(live.Object, "spec", "replicas")
	assert.Equal(t, int64(2), replicas, "kept")
	assert.Equal(t, "v2", live.GetAnnotations()["example.com/version"])
	assert.False(t, claimsReplicas(live, apply.DefaultFieldManager))
	assert.True(t, claimsReplicas(live, apply.DefaultFieldManager+apply.HandoverSuffix))

	// An autoscaler changes replicas with an update: no write, no drift.
	patch := []byte(`{"spec":{"replicas":4}}`)
	require.NoError(t, e.mgmt.Patch(t.Context(), live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("autoscaler")))
	counted, requests := countingConfig(management.Config)
	c, err := client.New(counted, client.Options{})
	require.NoError(t, err)
	creq := req
	creq.Targets = map[string]apply.Target{"": {Client: c, Name: "management cluster"}}
	_, err = engine.Apply(t.Context(), creq)
	require.NoError(t, err)
	counts := requests.reset()
	assert.Equal(t, 0, counts["PATCH"]+counts["PUT"]+counts["POST"], "writes: %v", counts)
	// A revision that changes another field keeps the autoscaler's replicas.
	v3 := v2.DeepCopy()
	v3.SetAnnotations(map[string]string{"example.com/version": "v3"})
	req.Phases[0].Objects[0] = v3
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Empty(t, res.Drift)
	live, _ = get(t, e.mgmt, deploy)
	replicas, _, _ = unstructured.NestedInt64(live.Object, "spec", "replicas")
	assert.Equal(t, int64(4), replicas)
	assert.Equal(t, "v3", live.GetAnnotations()["example.com/version"])

	// Without the rule, pkgsync takes the field back from its own hand-over manager.
	req.IgnoreFields = nil
	req.DriftPolicy = v1alpha1.DriftCorrect
	_, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	live, _ = get(t, e.mgmt, deploy)
	replicas, _, _ = unstructured.NestedInt64(live.Object, "spec", "replicas")
	assert.Equal(t, int64(5), replicas)
}

func TestDriftIsReportedNotCorrected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	cm := e.configMap(t, "settings", map[string]string{"mode": "safe", "size": "s"})
	req := apply.Request{Owner: e.owner, Targets: e.targets, DriftPolicy: v1alpha1.DriftReport,
		Phases: []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{cm}}}}
	res := applyUntilComplete(t, engine, req)
	req.Previous = res.Inventory
	assert.Empty(t, res.Drift)

	live, _ := get(t, e.mgmt, cm)
	require.NoError(t, unstructured.SetNestedField(live.Object, "unsafe", "data", "mode"))
	unstructured.RemoveNestedField(live.Object, "data", "size")
	require.NoError(t, e.mgmt.Update(t.Context(), live, client.FieldOwner("kubectl-edit")))
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Updated)
	require.Len(t, res.Drift, 1)
	assert.Equal(t, []string{"/data/mode", "/data/size"}, res.Drift[0].Paths)
	assert.False(t, res.Drift[0].Corrected)
	live, _ = get(t, e.mgmt, cm)
	assert.Equal(t, "unsafe", live.Object["data"].(map[string]any)["mode"], "left as it is")

	// A new desired state is applied, drift or not.
	req.Phases[0].Objects[0] = e.configMap(t, "settings", map[string]string{"mode": "safe", "size": "m"})
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Updated)
	assert.Empty(t, res.Drift)
	live, _ = get(t, e.mgmt, cm)
	assert.Equal(t, map[string]any{"mode": "safe", "size": "m"}, live.Object["data"])

	// With Correct, drift is applied again and counted.
	require.NoError(t, unstructured.SetNestedField(live.Object, "unsafe", "data", "mode"))
	require.NoError(t, e.mgmt.Update(t.Context(), live, client.FieldOwner("kubectl-edit")))
	req.DriftPolicy = v1alpha1.DriftCorrect
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Updated)
	require.Len(t, res.Drift, 1)
	assert.True(t, res.Drift[0].Corrected)
	assert.Equal(t, []string{"/data/mode"}, res.Drift[0].Paths)
}

// TestIgnoredFieldTakenByAnotherApplier has another manager claim the ignored field with a
// server-side apply (forced, as controllers apply) while pkgsync still owns it alone: pkgsync
// neither conflicts nor takes it back, on the interval or with a revision.
func TestIgnoredFieldTakenByAnotherApplier(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	engine := apply.NewEngine(apply.Options{})
	deploy := e.obj(t, deploymentYAML)
	req := apply.Request{Owner: e.owner, Targets: e.targets,
		IgnoreFields: []v1alpha1.IgnoreFields{{Group: "apps", Kind: "Deployment", Name: "web", JSONPointers: []string{"/spec/replicas"}}},
		Phases:       []desired.Phase{{Name: "one", Objects: []*unstructured.Unstructured{deploy}}}}
	res, err := engine.Apply(t.Context(), req)
	require.NoError(t, err)
	req.Previous = res.Inventory

	claim := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": e.ns}, "spec": map[string]any{"replicas": int64(6)}}}
	require.NoError(t, e.mgmt.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(claim), client.FieldOwner("scaler"), client.ForceOwnership))

	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Unchanged, "the other applier's replicas are no change")
	v2 := e.obj(t, deploymentYAML)
	v2.SetAnnotations(map[string]string{"example.com/version": "v2"})
	req.Phases[0].Objects[0] = v2
	res, err = engine.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Updated)
	live, _ := get(t, e.mgmt, deploy)
	replicas, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	assert.Equal(t, int64(6), replicas)
	assert.True(t, claimsReplicas(live, "scaler"))
	assert.False(t, claimsReplicas(live, apply.DefaultFieldManager))
	assert.False(t, claimsReplicas(live, apply.DefaultFieldManager+apply.HandoverSuffix), "nothing to hand over")
}
