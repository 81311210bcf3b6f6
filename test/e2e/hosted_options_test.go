package e2e

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// hangUp is a hosted API server address that accepts connections and closes them at once,
// counting them.
type hangUp struct {
	listener net.Listener
	accepted atomic.Int64
}

func newHangUp(t *testing.T) *hangUp {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hangUp{listener: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return h
}

// shardedInlineDeployment is inlineDeployment labelled for the controller process of shard.
func shardedInlineDeployment(t *testing.T, shard, namespace, name, hostedNamespace string) *v1alpha1.ObjectDeployment {
	t.Helper()
	od := inlineDeployment(t, namespace, name, hostedNamespace)
	od.Labels = map[string]string{shardLabel: shard}
	return od
}

// TestDisableHostedClusters: a controller started with --disable-hosted-clusters applies the
// management phases before the first hosted one and reports the hosted phase as unavailable,
// saying why; nothing reaches the hosted cluster.
func TestDisableHostedClusters(t *testing.T) {
	t.Parallel()
	runController(t, "no-hosted", "--disable-hosted-clusters")
	_, hcp := newHostedControlPlane(t, "", true)
	hostedNS := fmt.Sprintf("no-hosted-%d", nsCounter.Add(1))
	od := &v1alpha1.ObjectDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: hcp, Name: "disabled", Labels: map[string]string{shardLabel: "no-hosted"}},
		Spec: v1alpha1.ObjectDeploymentSpec{Template: v1alpha1.ObjectSetTemplate{Spec: v1alpha1.ObjectSetTemplateSpec{
			Phases: []v1alpha1.ObjectSetPhase{
				{Name: "operator", Objects: []v1alpha1.ObjectSetObject{inlineConfigMap(t, hcp, "operator")}},
				{Name: "hosted", Class: v1alpha1.ClassHostedCluster, Objects: []v1alpha1.ObjectSetObject{
					inlineObject(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": hostedNS}}),
				}},
			},
		}}},
	}
	createPackage(t, od)
	cond := waitForReady(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason)
	assert.Contains(t, cond.Message, "hosted-cluster phases are disabled in this controller")
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "operator"), "the management phase before it is applied")
	assert.False(t, exists(t, suite.hostedClient, "v1", "Namespace", "", hostedNS), "nothing reaches the hosted cluster")
}

// TestHostedTeardownTimeout: a resource is deleted while its hosted API server does not answer.
// Deletion waits --hosted-teardown-timeout for it, then lets the hosted objects go (a Warning
// event says so), removes the management objects and the finalizer.
func TestHostedTeardownTimeout(t *testing.T) {
	t.Parallel()
	const teardownTimeout = 8 * time.Second
	runController(t, "teardown", "--hosted-teardown-timeout", teardownTimeout.String())
	_, hcp := newHostedControlPlane(t, "", true)
	hostedNS := fmt.Sprintf("teardown-%d", nsCounter.Add(1))
	deleteHostedNamespaceAtEnd(t, hostedNS)
	od := shardedInlineDeployment(t, "teardown", hcp, "leaving", hostedNS)
	createPackage(t, od)
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	kubeconfig, err := suite.hosted.ConnectorKubeconfig("teardown-gone-" + hcp)
	require.NoError(t, err)
	putConnectorSecret(t, hcp, rewriteServer(t, kubeconfig, "https://"+refusedAddress(t)))
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), od))
	deleted := time.Now()
	gone := func() bool {
		err := suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(od), &v1alpha1.ObjectDeployment{})
		return apierrors.IsNotFound(err)
	}
	assert.Never(t, gone, teardownTimeout/2, interval, "deletion waits for the hosted cluster until the timeout")
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.True(ct, gone(), "the resource is still there") }, timeout, interval)
	// The deletion timestamp the timeout counts from has a precision of one second.
	assert.GreaterOrEqual(t, time.Since(deleted), teardownTimeout-time.Second)
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "leaving-operator"), "management objects are deleted")
	assert.True(t, exists(t, suite.hostedClient, "v1", "ConfigMap", hostedNS, "settings"), "hosted objects are let go, not deleted")

	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(hcp)))
	var left []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == od.Name && e.Reason == v1alpha1.ObjectsLeftReason {
			left = append(left, e.Message)
		}
	}
	if assert.Len(t, left, 1, "one Warning event names what was let go") {
		assert.Contains(t, left[0], "ConfigMap")
	}
}

// TestHostedUnavailableCoolDown: once a hosted API server fails, its resources are not retried
// at --retry-interval (500ms here) but at the circuit's next probe (an hour here): no reconcile
// and no connection meanwhile. A new connector Secret wakes them at once.
func TestHostedUnavailableCoolDown(t *testing.T) {
	t.Parallel()
	proc := runController(t, "cooldown", "--hosted-probe-interval", "1h", "--hosted-probe-max-interval", "1h")
	dead := newHangUp(t)
	_, hcp := newHostedControlPlane(t, "", true)
	kubeconfig, err := suite.hosted.ConnectorKubeconfig("cooldown-" + hcp)
	require.NoError(t, err)
	putConnectorSecret(t, hcp, rewriteServer(t, kubeconfig, "https://"+dead.listener.Addr().String()))
	hostedNS := fmt.Sprintf("cooldown-%d", nsCounter.Add(1))
	deleteHostedNamespaceAtEnd(t, hostedNS)
	od := shardedInlineDeployment(t, "cooldown", hcp, "cooling", hostedNS)
	createPackage(t, od)
	// The first failure opens the circuit; from then on reconciles fail fast and say that
	// nothing is sent before a probe answers.
	waitForReadyMessage(t, od, metav1.ConditionFalse, v1alpha1.HostedClusterUnavailableReason, "nothing is sent to it until a probe gets an answer")
	require.Positive(t, dead.accepted.Load(), "the first reconcile tried the hosted API server")

	odReconciles := map[string]string{"controller": "objectdeployment"}
	before := currentMetric(t, proc, "controller_runtime_reconcile_total", odReconciles)
	connections := dead.accepted.Load()
	assert.Never(t, func() bool {
		m, err := proc.scrape(t.Context())
		if err != nil {
			return false
		}
		now, _ := sum(m, "controller_runtime_reconcile_total", odReconciles)
		return now > before || dead.accepted.Load() > connections
	}, 3*time.Second, 250*time.Millisecond, "no reconcile and no connection before the next probe")

	putConnectorSecret(t, hcp, kubeconfig)
	waitForReady(t, od, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
}
