package hosted

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"pkgsync.dev/pkgsync/test/testenv"
)

// TestTrimHostedCluster: the cache keeps of a HostedCluster what pkgsync reads, and
// FindHostedCluster tells the same from the trimmed object as from the whole one.
func TestTrimHostedCluster(t *testing.T) {
	t.Parallel()
	whole := func() *unstructured.Unstructured {
		u := testenv.HostedCluster("clusters", "hc1")
		u.SetLabels(map[string]string{"wave": "canary"})
		u.SetAnnotations(map[string]string{"team": "a"})
		spec := u.Object["spec"].(map[string]any)
		spec["nodeSelector"] = map[string]any{"role": "infra"}
		spec["platform"] = map[string]any{"type": "AWS", "aws": map[string]any{"region": "us-east-1"}}
		spec["imageContentSources"] = []any{map[string]any{"source": "quay.io/team", "mirrors": []any{"mirror.example.com/team"}}}
		u.Object["status"] = map[string]any{
			"conditions": []any{
				testenv.Condition("Available", false, "waiting", 1),
				testenv.Condition("ReconciliationActive", false, "Reconciliation paused until: true", 1),
			},
			"version": map[string]any{"history": []any{map[string]any{"version": "4.20.1"}}},
		}
		return u
	}
	out, err := TrimHostedCluster(whole())
	require.NoError(t, err)
	trimmed, ok := out.(*unstructured.Unstructured)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"nodeSelector": map[string]any{"role": "infra"}, "platform": map[string]any{"type": "AWS"},
		"imageContentSources": []any{map[string]any{"source": "quay.io/team", "mirrors": []any{"mirror.example.com/team"}}}}, trimmed.Object["spec"])
	_, hasVersion, _ := unstructured.NestedFieldNoCopy(trimmed.Object, "status", "version")
	assert.False(t, hasVersion, "status.version is not kept")
	assert.Equal(t, HostedClusterGVK, trimmed.GroupVersionKind())

	find := func(u *unstructured.Unstructured) *HostedCluster {
		// A scheme of its own: the fake client registers the unstructured kinds it lists in its
		// scheme, which would race with the other tests' clients on client-go's global one.
		s := runtime.NewScheme()
		require.NoError(t, clientgoscheme.AddToScheme(s))
		reader := fake.NewClientBuilder().WithScheme(s).WithObjects(u).Build()
		hc, err := FindHostedCluster(t.Context(), reader, reader, "clusters-hc1", false)
		require.NoError(t, err)
		require.NotNil(t, hc)
		return hc
	}
	assert.Equal(t, find(whole()), find(trimmed))
	assert.Equal(t, []ImageContentSource{{Source: "quay.io/team", Mirrors: []string{"mirror.example.com/team"}}}, find(trimmed).ImageContentSources)

	other := &corev1.ConfigMap{}
	passed, err := TrimHostedCluster(other)
	require.NoError(t, err)
	assert.Same(t, other, passed, "other objects pass through")
}

// TestFindHostedClusterCollision: a-x/b, a/x-b and a/x.b all map to namespace a-x-b. Against a
// real API server, the HostedControlPlane there decides which one the namespace belongs to;
// without one naming a candidate, the lookup refuses to choose, naming every candidate, instead
// of handing templates another cluster's labels.
func TestFindHostedClusterCollision(t *testing.T) {
	t.Parallel()
	cp := testenv.NewControlPlane(t, "hostedcluster")
	crds, err := testenv.HyperShiftCRDs()
	require.NoError(t, err)
	_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{CRDs: crds})
	require.NoError(t, err)
	c, err := client.New(cp.Config, client.Options{})
	require.NoError(t, err)
	ctx := t.Context()
	for _, ns := range []string{"a", "a-x", "a-x-b", "solo"} {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	for _, hc := range []struct{ namespace, name, wave string }{{"a-x", "b", "one"}, {"a", "x-b", "two"}, {"a", "x.b", "three"}, {"solo", "only", "four"}} {
		u := testenv.HostedCluster(hc.namespace, hc.name)
		u.SetLabels(map[string]string{"wave": hc.wave})
		require.NoError(t, c.Create(ctx, u))
	}
	find := func(namespace string) (*HostedCluster, error) {
		return FindHostedCluster(ctx, c, c, namespace, false)
	}

	solo, err := find("solo-only")
	require.NoError(t, err)
	require.NotNil(t, solo)
	assert.Equal(t, "four", solo.Labels["wave"], "one HostedCluster per namespace needs no HostedControlPlane")

	_, err = find("a-x-b")
	var ambiguous *AmbiguousError
	require.ErrorAs(t, err, &ambiguous, "three HostedClusters map to a-x-b and nothing says which one owns it")
	for _, name := range []string{"a-x/b", "a/x-b", "a/x.b"} {
		assert.Contains(t, err.Error(), name)
	}
	assert.Contains(t, err.Error(), "no HostedControlPlane")

	hcp := testenv.HostedControlPlane(testenv.HostedCluster("elsewhere", "x-b"), "a-x-b")
	require.NoError(t, c.Create(ctx, hcp))
	_, err = find("a-x-b")
	require.ErrorAs(t, err, &ambiguous, "a HostedControlPlane naming none of them settles nothing")
	assert.Contains(t, err.Error(), ClusterAnnotation)

	hcp.SetAnnotations(map[string]string{ClusterAnnotation: "a/x-b"})
	require.NoError(t, c.Update(ctx, hcp))
	owner, err := find("a-x-b")
	require.NoError(t, err)
	require.NotNil(t, owner)
	assert.Equal(t, types.NamespacedName{Namespace: "a", Name: "x-b"}, types.NamespacedName{Namespace: owner.Namespace, Name: owner.Name})
	assert.Equal(t, "two", owner.Labels["wave"], "templates see the labels of the HostedCluster HyperShift put there")
}
