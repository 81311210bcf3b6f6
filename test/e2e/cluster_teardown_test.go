package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// hostedAddonPackage is a two-phase package: a ConfigMap named after the Package's namespace
// in the hosted cluster's default namespace, then a Deployment "operator" beside the Package on
// the management cluster.
var hostedAddonPackage = map[string]string{
	"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: addon
spec:
  scopes: [Namespaced]
  phases:
  - name: hosted
    class: hosted-cluster
  - name: deploy
`,
	"hosted.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: addon-{{ .package.metadata.namespace }}
  namespace: default
  annotations:
    pkgsync.dev/phase: hosted
data:
  k: v
`,
	"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: operator
  annotations:
    pkgsync.dev/phase: deploy
spec:
  selector:
    matchLabels: {app: operator}
  template:
    metadata:
      labels: {app: operator}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: operator
        image: registry.k8s.io/pause:3.10
`,
}

// TestRealClusterPackageDeletionLeavesNothing: deleting a Package whose Deployment has dependents
// (a ReplicaSet and its pods, which pkgsync never applied) leaves none of them: pkgsync deletes
// the Deployment, the garbage collector the rest.
func TestRealClusterPackageDeletionLeavesNothing(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	pkg, _ := env.installDeployment(t, 2, "100m", 600)
	ns := pkg.Namespace
	env.ready(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "")
	var sets appsv1.ReplicaSetList
	require.NoError(t, env.client.List(t.Context(), &sets, client.InNamespace(ns)))
	require.NotEmpty(t, sets.Items, "the Deployment controller made a ReplicaSet")

	require.NoError(t, env.client.Delete(t.Context(), pkg))
	env.waitGone(t, pkg)
	ctx := t.Context()
	eventuallyFor(t, ctx, clusterTimeout, func(a *attempt) {
		for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.ReplicaSetList{}, &corev1.PodList{}} {
			if assert.NoError(a, env.client.List(ctx, list, client.InNamespace(ns))) {
				assert.Zero(a, lenOf(list), "%T left in %s", list, ns)
			}
		}
	}, "the Deployment and its dependents are gone")
}

func lenOf(list client.ObjectList) int {
	switch l := list.(type) {
	case *appsv1.DeploymentList:
		return len(l.Items)
	case *appsv1.ReplicaSetList:
		return len(l.Items)
	case *corev1.PodList:
		return len(l.Items)
	}
	return -1
}

// TestRealClusterHCPNamespaceDeletion: HyperShift deletes a whole hosted-control-plane namespace,
// Packages and all. The namespace controller deletes the Packages with everything else; their
// teardown never holds the namespace: with the hosted API server answering, the hosted objects
// are removed too; with it gone, they are let go. Either way the namespace is gone well within
// the hosted teardown timeout plus the namespace controller's own work, and nothing of the
// Packages is left on the management cluster.
func TestRealClusterHCPNamespaceDeletion(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	for _, reachable := range []bool{true, false} {
		name := map[bool]string{true: "hosted-api-answers", false: "hosted-api-gone"}[reachable]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			proxy := startProxy(t, hostOf(t, suite.hosted.Config))
			kubeconfig, err := suite.hosted.ConnectorKubeconfig("cluster-hcp-" + name + "-" + time.Now().Format("150405.000"))
			require.NoError(t, err)
			_, hcp := env.hostedControlPlane(t, rewriteServer(t, kubeconfig, "https://"+proxy.addr), nil)
			image := suite.registry.Host + "/e2e/cluster/" + hcp + "/addon:v1"
			pushPackageTo(t, writePackage(t, hostedAddonPackage), image)
			pkg := newPackage(hcp, "addon", image, "")
			require.NoError(t, env.client.Create(t.Context(), pkg))
			env.ready(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "")
			hostedCM := "addon-" + hcp
			assert.True(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "default", hostedCM))
			t.Cleanup(func() {
				_ = client.IgnoreNotFound(suite.hostedClient.Delete(context.WithoutCancel(t.Context()), configMap("default", hostedCM)))
			})
			if !reachable {
				proxy.stop()
			}

			start := time.Now()
			require.NoError(t, env.client.Delete(t.Context(), namespaceObj(hcp)))
			env.waitGone(t, namespaceObj(hcp))
			t.Logf("namespace %s gone in %s", hcp, time.Since(start).Round(time.Millisecond))
			err = env.client.Get(t.Context(), client.ObjectKeyFromObject(pkg), &v1alpha1.Package{})
			assert.True(t, apierrors.IsNotFound(err), "the Package went with its namespace: %v", err)
			if reachable {
				assert.False(t, exists(t, suite.hostedClient, "v1", "ConfigMap", "default", hostedCM), "the hosted objects were removed")
			}
		})
	}
}
