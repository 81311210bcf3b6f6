package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// busyPackage holds objects whose status or dependents the cluster's controllers write all the
// time: a Deployment (its status, ReplicaSets and pods), a Service (its EndpointSlices), a
// PodDisruptionBudget (its status) and a ServiceAccount.
var busyPackage = map[string]string{
	"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: busy\nspec:\n  phases:\n  - name: deploy\n",
	"objects.yaml": `apiVersion: v1
kind: ServiceAccount
metadata:
  name: busy
  annotations:
    pkgsync.dev/phase: deploy
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: busy
  annotations:
    pkgsync.dev/phase: deploy
spec:
  replicas: 2
  selector:
    matchLabels: {app: busy}
  template:
    metadata:
      labels: {app: busy}
    spec:
      serviceAccountName: busy
      terminationGracePeriodSeconds: 0
      containers:
      - name: busy
        image: registry.k8s.io/pause:3.10
        ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: busy
  annotations:
    pkgsync.dev/phase: deploy
spec:
  selector: {app: busy}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: busy
  annotations:
    pkgsync.dev/phase: deploy
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: busy}
`,
}

// TestRealClusterIdleMinuteWritesNothing: a converged Package reconciling every 5 seconds for a
// minute on a cluster whose controllers keep writing its objects' status and dependents sends
// reads, and not one write, to its namespace.
func TestRealClusterIdleMinuteWritesNothing(t *testing.T) {
	t.Parallel()
	env := useCluster(t)
	ns := env.namespace(t, nil)
	image := suite.registry.Host + "/e2e/cluster/" + ns + "/busy:v1"
	pushPackageTo(t, writePackage(t, busyPackage), image)
	pkg := newPackage(ns, "busy", image, "")
	pkg.Spec.Interval = &metav1.Duration{Duration: 5 * time.Second}
	env.create(t, pkg)
	env.ready(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "")
	// The status write of the converging reconcile may still be under way: start counting once
	// the Package's status has settled on what it observed.
	ctx := t.Context()
	eventuallyFor(t, ctx, clusterTimeout, func(a *attempt) {
		if assert.NoError(a, env.client.Get(ctx, clientKey(pkg), pkg)) {
			assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
		}
	}, "the Package observed its generation")

	const objects, reconciles, window = 4, 10, time.Minute
	before, start := env.requests.get(ns), time.Now()
	eventuallyFor(t, ctx, window+clusterTimeout, func(a *attempt) {
		assert.GreaterOrEqual(a, env.requests.get(ns)["GET"]-before["GET"], objects*reconciles, "reconciles on the interval")
		assert.GreaterOrEqual(a, time.Since(start), window, "a minute has passed")
	}, "an idle minute")
	after := env.requests.get(ns)
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		assert.Equal(t, before[method], after[method], "%s requests in an idle minute", method)
	}
}
