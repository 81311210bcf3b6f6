package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestCacheStripsManagedFields: cached objects are kept without managedFields (a good part of a
// large object's size, and never read from the cache); the rest of the object stays.
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
}
