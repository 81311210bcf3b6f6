package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// conditionMapPackage is a Package Operator package whose Deployment reports its Available
// condition into the Package's status.
var conditionMapPackage = map[string]string{
	"manifest.yaml": `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: mapped}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
`,
	"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  annotations:
    package-operator.run/phase: deploy
    package-operator.run/condition-map: |
      Available => example.com/AppAvailable
      Progressing => example.com/AppProgressing
spec:
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`,
}

// Package Operator's condition-map annotation: the object's conditions show in the Package's
// status under the mapped types, and the annotation itself is not applied.
func TestConditionMapReportsObjectConditionsOnThePackage(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pushPackage(t, writePackage(t, conditionMapPackage), "e2e/"+ns+"/mapped:v1")
	pkg := newPackage(ns, "mapped", suite.registry.Host+"/e2e/"+ns+"/mapped:v1", "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	markDeploymentAvailable(t, suite.mgmtClient, ns, "app")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		for _, typ := range []string{"example.com/AppAvailable", "example.com/AppProgressing"} {
			c := apimeta.FindStatusCondition(pkg.Status.Conditions, typ)
			if assert.NotNil(a, c, "no %s condition in %v", typ, pkg.Status.Conditions) {
				assert.Equal(a, metav1.ConditionTrue, c.Status)
				assert.Equal(a, pkg.Generation, c.ObservedGeneration)
			}
		}
	})
	available := apimeta.FindStatusCondition(pkg.Status.Conditions, "example.com/AppAvailable")
	assert.Equal(t, "MinimumReplicasAvailable", available.Reason)

	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "app"}, d))
	assert.NotContains(t, d.GetAnnotations(), "package-operator.run/condition-map")
}
