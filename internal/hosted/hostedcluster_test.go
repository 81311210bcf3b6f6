package hosted

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestTrimHostedCluster: the cache keeps of a HostedCluster what pkgsync reads, and
// FindHostedCluster tells the same from the trimmed object as from the whole one.
func TestTrimHostedCluster(t *testing.T) {
	t.Parallel()
	whole := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "hc1", "namespace": "clusters",
				"labels": map[string]any{"wave": "canary"}, "annotations": map[string]any{"team": "a"}},
			"spec": map[string]any{
				"nodeSelector": map[string]any{"role": "infra"},
				"platform":     map[string]any{"type": "AWS", "aws": map[string]any{"region": "us-east-1"}},
				"networking":   map[string]any{"clusterNetwork": []any{map[string]any{"cidr": "10.132.0.0/14"}}},
				"pullSecret":   map[string]any{"name": "pull"},
			},
			"status": map[string]any{
				"conditions": []any{
					map[string]any{"type": "Available", "status": "False", "message": "waiting"},
					map[string]any{"type": "ReconciliationActive", "status": "False"},
				},
				"version": map[string]any{"history": []any{map[string]any{"version": "4.20.1"}}},
			},
		}}
		u.SetGroupVersionKind(HostedClusterGVK)
		return u
	}
	out, err := TrimHostedCluster(whole())
	require.NoError(t, err)
	trimmed, ok := out.(*unstructured.Unstructured)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"nodeSelector": map[string]any{"role": "infra"}, "platform": map[string]any{"type": "AWS"}}, trimmed.Object["spec"])
	_, hasVersion, _ := unstructured.NestedFieldNoCopy(trimmed.Object, "status", "version")
	assert.False(t, hasVersion, "status.version is not kept")
	assert.Equal(t, HostedClusterGVK, trimmed.GroupVersionKind())

	find := func(u *unstructured.Unstructured) *HostedCluster {
		reader := fake.NewClientBuilder().WithObjects(u).Build()
		hc, err := FindHostedCluster(t.Context(), reader, "clusters-hc1", false)
		require.NoError(t, err)
		require.NotNil(t, hc)
		return hc
	}
	assert.Equal(t, find(whole()), find(trimmed))

	other := &corev1.ConfigMap{}
	passed, err := TrimHostedCluster(other)
	require.NoError(t, err)
	assert.Same(t, other, passed, "other objects pass through")
}
