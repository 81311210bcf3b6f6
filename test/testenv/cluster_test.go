package testenv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestCluster: a cluster's controllers do their jobs (a Deployment rolls out onto simulated
// nodes; a deleted namespace is emptied and removed), and Stop ends every component.
func TestCluster(t *testing.T) {
	c, err := StartCluster(t.Context(), "cluster", t.TempDir(), ClusterOptions{Nodes: 1})
	require.NoError(t, err)
	components := c.components
	t.Cleanup(func() {
		require.NoError(t, c.Stop())
		for _, p := range components {
			assert.True(t, p.exited(), "%s still runs after Stop", p.name)
		}
	})
	cs, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	ctx := t.Context()

	// The nodes have the capacity the cluster gave them, not KWOK's defaults (1000 CPUs).
	for _, name := range c.Nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "4", node.Status.Allocatable.Cpu().String(), "node %s", name)
		assert.Equal(t, "4", node.Status.Capacity.Cpu().String(), "node %s", name)
	}

	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labels := map[string]string{"app": "app"}
	_, err = cs.AppsV1().Deployments("app").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		d, err := cs.AppsV1().Deployments("app").Get(ctx, "app", metav1.GetOptions{})
		if assert.NoError(ct, err) {
			assert.Equal(ct, int32(2), d.Status.AvailableReplicas)
		}
	}, clusterReadyTimeout, 100*time.Millisecond, "the Deployment rolls out")

	require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, "app", metav1.DeleteOptions{}))
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "app", metav1.GetOptions{})
		assert.True(ct, apierrors.IsNotFound(err), "namespace still there: %v", err)
	}, clusterReadyTimeout, 100*time.Millisecond, "the namespace controller removes the namespace")
}
