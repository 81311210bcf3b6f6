package apply

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply/probing"
)

func TestDiffPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		desired, live map[string]any
		want          []string
	}{
		{name: "equal, live has more", desired: map[string]any{"a": "1"}, live: map[string]any{"a": "1", "b": "2"}},
		{name: "changed scalar", desired: map[string]any{"spec": map[string]any{"replicas": int64(2)}}, live: map[string]any{"spec": map[string]any{"replicas": int64(3)}}, want: []string{"/spec/replicas"}},
		{name: "missing field", desired: map[string]any{"data": map[string]any{"x": "1", "y": "2"}}, live: map[string]any{"data": map[string]any{"x": "1"}}, want: []string{"/data/y"}},
		{name: "empty desired matches absent", desired: map[string]any{"data": map[string]any{}}, live: map[string]any{}},
		{name: "list element field", desired: map[string]any{"c": []any{map[string]any{"name": "a", "image": "1"}}}, live: map[string]any{"c": []any{map[string]any{"name": "a", "image": "2"}}}, want: []string{"/c/0/image"}},
		{name: "list of another length as a whole", desired: map[string]any{"c": []any{"a"}}, live: map[string]any{"c": []any{"a", "b"}}, want: []string{"/c"}},
		{name: "keys escaped", desired: map[string]any{"metadata": map[string]any{"labels": map[string]any{"example.com/a~b": "1"}}}, live: map[string]any{"metadata": map[string]any{"labels": map[string]any{}}}, want: []string{"/metadata/labels/example.com~1a~0b"}},
		{name: "sorted", desired: map[string]any{"b": "1", "a": "1"}, live: map[string]any{"a": "2", "b": "2"}, want: []string{"/a", "/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			diffPaths("", tc.desired, tc.live, &got)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, len(tc.want) == 0, probing.Subset(tc.desired, tc.live), "agrees with satisfied")
		})
	}
}

func TestDriftNeedsTheSameDesiredState(t *testing.T) {
	t.Parallel()
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}, "data": map[string]any{}}}
	for i := range 15 {
		desired.Object["data"].(map[string]any)[string(rune('a'+i))] = "1"
	}
	setDesiredHash(desired)
	live := desired.DeepCopy()
	live.Object["data"] = map[string]any{}

	d := drift(desired, live, v1alpha1.DriftReport)
	require.NotNil(t, d)
	assert.False(t, d.Corrected)
	assert.Len(t, d.Paths, MaxDriftPaths)
	assert.Equal(t, 5, d.More)
	assert.True(t, drift(desired, live, "").Corrected, "the default corrects")

	// A new desired state is no drift: it is applied.
	live.SetAnnotations(map[string]string{DesiredHashAnnotation: "older"})
	assert.Nil(t, drift(desired, live, v1alpha1.DriftReport))
}

func TestWithoutFields(t *testing.T) {
	t.Parallel()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"replicas": int64(2), "webhooks": []any{
			map[string]any{"name": "a", "caBundle": "x"}, map[string]any{"name": "b", "caBundle": "y"}}},
		"metadata": map[string]any{"annotations": map[string]any{"example.com/v": "1", "keep": "1"}},
	}}
	got := withoutFields(obj, [][]string{{"spec", "replicas"}, {"spec", "webhooks", "1", "caBundle"}, {"metadata", "annotations", "example.com/v"}, {"spec", "missing"}, {"spec", "webhooks", "7"}})
	assert.Equal(t, map[string]any{
		"spec": map[string]any{"webhooks": []any{
			map[string]any{"name": "a", "caBundle": "x"}, map[string]any{"name": "b"}}},
		"metadata": map[string]any{"annotations": map[string]any{"keep": "1"}},
	}, got.Object)
	assert.Equal(t, int64(2), obj.Object["spec"].(map[string]any)["replicas"], "the original is left")
}

// TestClaimedUnder builds the hand-over object from managed fields as the API server writes
// them: map fields, keyed list elements (with their keys), sets.
func TestClaimedUnder(t *testing.T) {
	t.Parallel()
	fields := `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}},"f:finalizers":{"v:\"a\"":{}}}`
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "side", "image": "s"}, map[string]any{"name": "web", "image": "w:1"}}}}},
		"finalizers": []any{"b", "a"},
	}}
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "other", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:paused":{}}}`)},
		{Manager: "pkgsync", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(fields)},
	})

	got, err := claimedUnder(live, "pkgsync", [][]string{{"spec", "replicas"}, {"spec", "template", "spec", "containers", "1", "image"}, {"finalizers"}})
	require.NoError(t, err)
	require.NotNil(t, got)
	want := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns"},` +
		`"finalizers":["a"],"spec":{"replicas":3,"template":{"spec":{"containers":[{"image":"w:1","name":"web"}]}}}}`
	b, err := json.Marshal(got.Object)
	require.NoError(t, err)
	assert.JSONEq(t, want, string(b))

	none, err := claimedUnder(live, "pkgsync", [][]string{{"spec", "paused"}})
	require.NoError(t, err)
	assert.Nil(t, none, "pkgsync does not claim it: nothing to hand over")
}
