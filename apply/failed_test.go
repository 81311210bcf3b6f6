package apply_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// setDeploymentPastDeadline plays the Deployment controller giving up on a rollout: past its
// progressDeadlineSeconds, Progressing=False with reason ProgressDeadlineExceeded.
func setDeploymentPastDeadline(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, d))
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	now := time.Now().UTC().Format(time.RFC3339)
	d.Object["status"] = map[string]any{
		"observedGeneration":  d.GetGeneration(),
		"replicas":            replicas,
		"updatedReplicas":     replicas,
		"unavailableReplicas": replicas,
		"conditions": []any{
			map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "lastTransitionTime": now},
			map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
				"message": `ReplicaSet "web-1" has timed out progressing.`, "lastTransitionTime": now},
		},
	}
	require.NoError(t, c.Status().Update(t.Context(), d))
}

// TestFailedObjectIsReported (issue 42): a Deployment past its progress deadline is kstatus
// Failed: the pass says so (Result.Failed) instead of reporting it as progress, and a
// Deployment that recovers is available again.
func TestFailedObjectIsReported(t *testing.T) {
	t.Parallel()
	e := newProgressEnv(t, 0)
	res, _, err := e.pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, "deploy", res.Progressing().Name)
	assert.Empty(t, res.Failed(), "a Deployment without status yet is in progress, not failed")

	setDeploymentPastDeadline(t, e.mgmt, e.ns, "web")
	res, _, err = e.pass(t.Context())
	require.NoError(t, err)
	require.False(t, res.Complete())
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.Equal(t, "web", failed[0].Ref.Name)
	assert.Contains(t, failed[0].Reason, "kstatus Failed")
	assert.Contains(t, failed[0].Reason, "Progress deadline exceeded")

	setDeploymentAvailable(t, e.mgmt, e.ns, "web")
	res, _, err = e.pass(t.Context())
	require.NoError(t, err)
	assert.Empty(t, res.Failed())
	assert.True(t, res.Complete(), res.Summary())
}
