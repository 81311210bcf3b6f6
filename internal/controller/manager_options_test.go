package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

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

// TestCacheKeepsConnectorSecretMetadataOnly: the connector Secrets' cache holds their identity,
// version and creation time; no labels, annotations or owners (and no data: it is a metadata
// cache, hosted.Clients reads the data from the API server).
func TestCacheKeepsConnectorSecretMetadataOnly(t *testing.T) {
	t.Parallel()
	opts := CacheOptions("connector", nil)
	var byObject cache.ByObject
	for obj, o := range opts.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			byObject = o
		}
	}
	require.NotNil(t, byObject.Transform)
	created := metav1.Now()
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "clusters-a", Name: "connector", UID: "u", ResourceVersion: "7", CreationTimestamp: created,
		Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
	}}
	out, err := byObject.Transform(in)
	require.NoError(t, err)
	assert.Equal(t, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "clusters-a", Name: "connector", UID: "u", ResourceVersion: "7", CreationTimestamp: created,
	}}, out)
}

// TestShardLabelKeysAndLease: the keys a selector reads, once each, and a lease per selector.
func TestShardLabelKeysAndLease(t *testing.T) {
	t.Parallel()
	a, err := labels.Parse("pkgsync.dev/shard=a,team in (x,y)")
	require.NoError(t, err)
	none, err := labels.Parse("!pkgsync.dev/shard")
	require.NoError(t, err)
	assert.Equal(t, []string{"pkgsync.dev/shard", "team"}, ShardLabelKeys(a))
	assert.Equal(t, []string{"pkgsync.dev/shard"}, ShardLabelKeys(none))
	assert.Nil(t, ShardLabelKeys(nil))

	assert.Equal(t, "pkgsync-controller", LeaderElectionID("pkgsync-controller", nil))
	assert.Equal(t, "pkgsync-controller", LeaderElectionID("pkgsync-controller", labels.Everything()))
	idA, idNone := LeaderElectionID("pkgsync-controller", a), LeaderElectionID("pkgsync-controller", none)
	assert.NotEqual(t, idA, idNone, "shards never share a lease")
	again, err := labels.Parse("pkgsync.dev/shard=a,team in (x,y)")
	require.NoError(t, err)
	assert.Equal(t, idA, LeaderElectionID("pkgsync-controller", again), "replicas of one shard share one")
	assert.Regexp(t, `^pkgsync-controller-[0-9a-f]{10}$`, idA)
}
