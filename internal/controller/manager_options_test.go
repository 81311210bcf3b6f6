package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// TestCacheStripsManagedFields: cached objects are kept without managedFields (a good part of a
// large object's size, and never read from the cache); the rest of the object stays, but for
// HostedClusters, trimmed to what pkgsync reads.
func TestCacheStripsManagedFields(t *testing.T) {
	t.Parallel()
	opts := CacheOptions("connector", nil)
	require.NotNil(t, opts.DefaultTransform)
	pkg := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{
		Name: "p", Namespace: "ns", Annotations: map[string]string{"keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}}
	out, err := opts.DefaultTransform(pkg)
	require.NoError(t, err)
	cached, ok := out.(*v1alpha1.Package)
	require.True(t, ok)
	assert.Empty(t, cached.ManagedFields)
	assert.Equal(t, map[string]string{"keep": "me"}, cached.Annotations)

	hc := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"platform": map[string]any{"type": "AWS", "aws": map[string]any{}}}}}
	hc.SetGroupVersionKind(hosted.HostedClusterGVK)
	hc.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "hypershift"}})
	out, err = opts.DefaultTransform(hc)
	require.NoError(t, err)
	u, ok := out.(*unstructured.Unstructured)
	require.True(t, ok)
	assert.Empty(t, u.GetManagedFields())
	assert.Equal(t, map[string]any{"platform": map[string]any{"type": "AWS"}}, u.Object["spec"], "HostedClusters are trimmed")
}
