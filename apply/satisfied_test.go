package apply

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSatisfied(t *testing.T) {
	t.Parallel()
	live := map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]any{"name": "s", "labels": map[string]any{"a": "1", "other": "x"}},
		"data":       map[string]any{"key": "dmFsdWU="}, // "value"
		"spec": map[string]any{
			"replicas": int64(2),
			"ratio":    float64(0.5),
			"ports":    []any{map[string]any{"port": int64(80), "protocol": "TCP"}},
		},
	}
	tests := []struct {
		name    string
		desired map[string]any
		want    bool
	}{
		{"subset of fields", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "1"}}}, true},
		{"changed label", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "2"}}}, false},
		{"missing label", map[string]any{"metadata": map[string]any{"labels": map[string]any{"b": "1"}}}, false},
		{"numbers by value", map[string]any{"spec": map[string]any{"replicas": float64(2), "ratio": float64(0.5)}}, true},
		{"different number", map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		{"list elements as subsets", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}, true},
		{"list of other length", map[string]any{"spec": map[string]any{"ports": []any{}}}, false},
		{"null and empty match absent", map[string]any{"metadata": map[string]any{"creationTimestamp": nil, "annotations": map[string]any{}}}, true},
		{"stringData folded into data", map[string]any{"stringData": map[string]any{"key": "value"}}, true},
		{"stringData differs", map[string]any{"stringData": map[string]any{"key": "other"}}, false},
		{"string is not a number", map[string]any{"spec": map[string]any{"replicas": "2"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &unstructured.Unstructured{Object: tt.desired}
			d.SetAPIVersion("v1")
			d.SetKind("Secret")
			assert.Equal(t, tt.want, satisfied(d, &unstructured.Unstructured{Object: live}))
		})
	}
}

func TestLabelValue(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "my-package", labelValue("my-package"))
	long := labelValue("a-very-long-name-" + "that-goes-on-and-on-beyond-the-sixty-three-characters-labels-allow")
	assert.Len(t, long, 63)
	assert.NotEqual(t, long, labelValue("a-very-long-name-that-goes-on-and-on-beyond-the-sixty-three-characters-labels-allowed"))
}
