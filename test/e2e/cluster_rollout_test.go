package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// deploymentPackage is a one-phase package of a Deployment "app" of replicas pods, each asking
// for cpu, which gives up progressing after deadline seconds.
func deploymentPackage(replicas int, cpu string, deadline int) map[string]string {
	return map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: app\nspec:\n  phases:\n  - name: deploy\n",
		"deploy.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  annotations:
    pkgsync.dev/phase: deploy
spec:
  replicas: %d
  progressDeadlineSeconds: %d
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: %q}
`, replicas, deadline, cpu),
	}
}

// installDeployment creates a namespace on the cluster with a Package "app" of
// deploymentPackage(replicas, cpu, deadline), both deleted when the test ends, and returns the
// Package and its image.
func (e *clusterEnv) installDeployment(t *testing.T, replicas int, cpu string, deadline int) (*v1alpha1.Package, string) {
	t.Helper()
	ns := e.namespace(t, nil)
	image := suite.registry.Host + "/e2e/cluster/" + ns + "/app:v1"
	pushPackageTo(t, writePackage(t, deploymentPackage(replicas, cpu, deadline)), image)
	pkg := newPackage(ns, "app", image, "")
	e.create(t, pkg)
	return pkg, image
}

// TestRealClusterDeploymentBecomesAvailable: on a cluster with its controllers, a Package's
// Deployment rolls out by itself, through a ReplicaSet and pods the scheduler places on nodes,
// and the Package turns Ready within a second or two of its becoming available (with the
// default 5 s progress interval: the first seconds of a wait are checked every second);
// nobody writes a status for it.
func TestRealClusterDeploymentBecomesAvailable(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	pkg, _ := env.installDeployment(t, 2, "100m", 600)
	ns := pkg.Namespace

	env.ready(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "")
	var dep appsv1.Deployment
	require.NoError(t, env.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "app"}, &dep))
	assert.Equal(t, int32(2), dep.Status.AvailableReplicas, "the Deployment controller reported it available")
	var available metav1.Time
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			available = c.LastTransitionTime
		}
	}
	ready := apimeta.FindStatusCondition(pkg.Status.Conditions, meta.ReadyCondition)
	require.NotNil(t, ready)
	assert.LessOrEqual(t, ready.LastTransitionTime.Sub(available.Time), 2*time.Second,
		"Ready at %s follows the Deployment's availability at %s", ready.LastTransitionTime, available)
	var pods corev1.PodList
	require.NoError(t, env.client.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": "app"}))
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		assert.Contains(t, env.cluster.Nodes, p.Spec.NodeName, "pod %s scheduled onto a node", p.Name)
		assert.Equal(t, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
		require.Len(t, p.OwnerReferences, 1)
		assert.Equal(t, "ReplicaSet", p.OwnerReferences[0].Kind, "pod %s belongs to a ReplicaSet", p.Name)
	}
}

// TestRealClusterDeploymentThatNeverFits: a Deployment whose pods fit on no node passes its
// progress deadline; the Package fails with the Deployment's own reason (Stalled, kstatus
// Failed) instead of waiting, and recovers when a new version fits.
func TestRealClusterDeploymentThatNeverFits(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	pkg, image := env.installDeployment(t, 1, "64", 5)
	ns := pkg.Namespace

	cond := env.ready(t, pkg, metav1.ConditionFalse, v1alpha1.ObjectsFailedReason, "Progressing=False ProgressDeadlineExceeded")
	assert.Contains(t, cond.Message, "Deployment")
	stalled := apimeta.FindStatusCondition(pkg.Status.Conditions, meta.StalledCondition)
	if assert.NotNil(t, stalled) {
		assert.Equal(t, metav1.ConditionTrue, stalled.Status)
	}
	var pods corev1.PodList
	require.NoError(t, env.client.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": "app"}))
	for _, p := range pods.Items {
		assert.Empty(t, p.Spec.NodeName, "pod %s fits on no node", p.Name)
	}

	pushPackageTo(t, writePackage(t, deploymentPackage(1, "100m", 600)), image)
	requestReconcileOn(t, env.client, pkg)
	env.ready(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "")
}

// TestRealClusterFleetFailsAMemberThatNeverFits: a fleet member whose Deployment passes its
// progress deadline fails at once, halting the rollout, long before the fleet's own
// progressDeadline (10 minutes by default).
func TestRealClusterFleetFailsAMemberThatNeverFits(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	fleetNs := env.namespace(t, nil)
	kubeconfig, err := suite.hosted.ConnectorKubeconfig("cluster-fleet-" + fleetNs)
	require.NoError(t, err)
	_, hcp := env.hostedControlPlane(t, kubeconfig, map[string]string{"e2e.pkgsync.dev/fleet": fleetNs})
	image := suite.registry.Host + "/e2e/cluster/" + fleetNs + "/app:v1"
	pushPackageTo(t, writePackage(t, deploymentPackage(1, "64", 5)), image)

	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "never-fits-" + fleetNs},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": fleetNs}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: image}},
		},
	}
	env.create(t, fleet)
	start := time.Now()
	env.ready(t, fleet, metav1.ConditionFalse, v1alpha1.RolloutHaltedReason, "")
	assert.Less(t, time.Since(start), 5*time.Minute, "failed at once, not at the fleet's progress deadline")
	require.NotEmpty(t, fleet.Status.FailedMembers)
	assert.Equal(t, hcp, fleet.Status.FailedMembers[0].Namespace)
	assert.Equal(t, int32(1), fleet.Status.Failed)
}
