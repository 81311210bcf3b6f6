package e2e

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// markDeploymentPastDeadline plays kube-controller-manager giving up on a Deployment's rollout:
// past progressDeadlineSeconds, Progressing=False, reason ProgressDeadlineExceeded.
func markDeploymentPastDeadline(t *testing.T, c client.Client, namespace, name string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var d appsv1.Deployment
		if !assert.NoError(ct, c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, &d)) {
			return
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
					Message: `ReplicaSet "base-1" has timed out progressing.`, LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			},
		}
		assert.NoError(ct, c.Status().Update(t.Context(), &d))
	}, timeout, interval)
}

// TestFailedDeploymentStallsThePackage (issue 42): a Deployment past its progress deadline
// (kstatus Failed) is a failure at once, not progress: Ready=False and Stalled=True with reason
// ObjectsFailed, Reconciling gone, a Warning event, and kstatus readers of the Package (kubectl
// wait, Flux, cli-utils) see it Failed and stop waiting. When the Deployment recovers, Ready
// follows.
func TestFailedDeploymentStallsThePackage(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pushPackage(t, writePackage(t, basePackage), "e2e/"+ns+"/base:v1")
	pkg := newPackage(ns, "base", suite.registry.Host+"/e2e/"+ns+"/base:v1", "")
	createPackage(t, pkg)
	waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.PhaseProgressingReason)

	markDeploymentPastDeadline(t, suite.mgmtClient, ns, "base")
	cond := waitForReadyMessage(t, pkg, metav1.ConditionFalse, v1alpha1.ObjectsFailedReason, "Progress deadline exceeded")
	assert.Contains(t, cond.Message, "phase deploy")
	stalled := apimeta.FindStatusCondition(pkg.Status.Conditions, meta.StalledCondition)
	require.NotNil(t, stalled)
	assert.Equal(t, metav1.ConditionTrue, stalled.Status)
	assert.Equal(t, v1alpha1.ObjectsFailedReason, stalled.Reason)
	assert.Nil(t, apimeta.FindStatusCondition(pkg.Status.Conditions, meta.ReconcilingCondition))

	u := &unstructured.Unstructured{}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pkg)
	require.NoError(t, err)
	u.SetUnstructuredContent(obj)
	res, err := status.Compute(u)
	require.NoError(t, err)
	assert.Equal(t, status.FailedStatus, res.Status, "kstatus readers stop waiting")

	eventually(t, func(a *attempt) {
		var events corev1.EventList
		if !assert.NoError(a, suite.mgmtClient.List(a.ctx, &events, client.InNamespace(ns))) {
			return
		}
		found := false
		for _, e := range events.Items {
			found = found || (e.Reason == v1alpha1.ObjectsFailedReason && e.InvolvedObject.Name == pkg.Name && e.Type == corev1.EventTypeWarning)
		}
		assert.True(a, found, "a Warning event ObjectsFailed")
	}, "the failure is announced")

	markDeploymentAvailable(t, suite.mgmtClient, ns, "base")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Nil(t, apimeta.FindStatusCondition(pkg.Status.Conditions, meta.StalledCondition))
}
