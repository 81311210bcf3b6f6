package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestControllerRestartResumesRollout stops the controller while a phase waits and starts a new
// one: the rollout resumes from the stored inventory, with no object lost or duplicated. The
// Package carries a shard label, so only the controllers of this test (sharded by
// --watch-label-selector) reconcile it.
func TestControllerRestartResumesRollout(t *testing.T) {
	// Not parallel: it stops and restarts a controller, one that shares the suite's source client.
	ns := newNamespace(t)
	pushPackage(t, writePackage(t, appPackage), "e2e/"+ns+"/app:v1")
	pkg := newPackage(ns, "app", suite.registry.Host+"/e2e/"+ns+"/app:v1", "")
	pkg.Labels = map[string]string{shardLabel: "restart"}

	ctx, stop := context.WithCancel(t.Context())
	stopped, err := startController(ctx, shardLabel+"=restart")
	require.NoError(t, err)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, "deploy", pkg.Status.Phase)
		assert.NotNil(a, pkg.Status.Inventory)
	})
	stop()
	<-stopped

	markDeploymentAvailable(t, suite.mgmtClient, ns, "app")
	// Not the test's context, which ends before the cleanups: the Package is deleted by this
	// controller when the test ends.
	ctx, stop = context.WithCancel(context.Background())
	stopped, err = startController(ctx, shardLabel+"=restart")
	require.NoError(t, err)
	t.Cleanup(func() { stop(); <-stopped })
	// Only this test's controller reconciles the Package: it is deleted while that one runs.
	t.Cleanup(func() { deleteAndWait(t, pkg) })

	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		if assert.NotNil(a, pkg.Status.Inventory) {
			assert.ElementsMatch(a, []string{
				"/v1/ConfigMap/" + ns + "/app-config", "/v1/ConfigMap/" + ns + "/app-extra", "apps/v1/Deployment/" + ns + "/app",
			}, inventoryIDs(pkg.Status.Inventory))
		}
	})
	var cms corev1.ConfigMapList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &cms, client.InNamespace(ns), client.MatchingLabels{ownerLabel: "app"}))
	assert.Len(t, cms.Items, 2)
}
