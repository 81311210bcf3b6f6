package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// scaledPackage is a Deployment whose replicas the package leaves to an autoscaler
// (spec.ignoreFields), with a version annotation that revisions change.
func scaledPackage(replicas, version string) map[string]string {
	return map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: scaled
spec:
  phases:
  - name: deploy
  ignoreFields:
  - group: apps
    kind: Deployment
    jsonPointers: ["/spec/replicas"]
`,
		"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    pkgsync.dev/phase: deploy
    example.com/version: "` + version + `"
spec:
  replicas: ` + replicas + `
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
`,
	}
}

// TestIgnoredFieldLeftToAnotherManager installs a Deployment whose spec.replicas the package
// ignores, and plays an autoscaler: another field manager changes replicas with an update, as the
// HorizontalPodAutoscaler does. pkgsync sets replicas on creation only, hands the field over
// before it stops claiming it (so a new revision neither reverts it nor resets it to the
// default), never counts its change as drift, and sends the Deployment no write while nothing
// else changed.
func TestIgnoredFieldLeftToAnotherManager(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "e2e/" + ns + "/scaled:stable"
	pushPackage(t, writePackage(t, scaledPackage("2", "v1")), repo)
	pkg := newPackage(ns, "scaled", suite.registry.Host+"/"+repo, "")
	pkg.Spec.DriftPolicy = v1alpha1.DriftReport
	pkg.Spec.Interval = &metav1.Duration{Duration: time.Second}
	createPackage(t, pkg)
	markDeploymentAvailable(t, suite.mgmtClient, ns, "web")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	deployment := func(t testingT) *appsv1.Deployment {
		var d appsv1.Deployment
		require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &d))
		return &d
	}
	claims := func(d *appsv1.Deployment, manager string) bool {
		for _, mf := range d.ManagedFields {
			if mf.Manager == manager && mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:replicas"`) {
				return true
			}
		}
		return false
	}
	assert.Equal(t, int32(2), ptr.Deref(deployment(t).Spec.Replicas, 0), "replicas are set on creation")
	// revise pushes a revision and waits until it is applied: a change of the Deployment's
	// annotations is a new generation, which the test makes available.
	revise := func(t *testing.T, files map[string]string, version string) {
		digest := pushPackage(t, writePackage(t, files), repo)
		eventually(t, func(a *attempt) {
			assert.Equal(a, version, deployment(a).Annotations["example.com/version"])
		}, "the revision is written")
		markDeploymentAvailable(t, suite.mgmtClient, ns, "web")
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			assert.Equal(a, digest, pkg.Status.LastAppliedRevision)
		}, "the revision is applied")
	}

	t.Run("a revision hands replicas over instead of resetting them", func(t *testing.T) {
		// The revision asks for 5 replicas: ignored after creation, and not reset to the
		// default of 1 either, although pkgsync alone claimed the field until now.
		revise(t, scaledPackage("5", "v2"), "v2")
		d := deployment(t)
		assert.Equal(t, "v2", d.Annotations["example.com/version"])
		assert.Equal(t, int32(2), ptr.Deref(d.Spec.Replicas, 0), "replicas kept")
		assert.False(t, claims(d, "pkgsync"), "pkgsync no longer claims replicas")
		assert.True(t, claims(d, "pkgsync-ignored"), "the hand-over manager keeps them")
	})

	t.Run("the autoscaler's replicas are neither reverted nor drift", func(t *testing.T) {
		d := deployment(t)
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](4)
		require.NoError(t, suite.mgmtClient.Patch(t.Context(), d, patch, client.FieldOwner("e2e-autoscaler")))
		markDeploymentAvailable(t, suite.mgmtClient, ns, "web")

		path := "/apis/apps/v1/namespaces/" + ns + "/deployments/web"
		writes := func() int { return suite.requests.path("PATCH", path) + suite.requests.path("PUT", path) }
		before, reads := writes(), suite.requests.path("GET", path)
		eventually(t, func(a *attempt) {
			assert.GreaterOrEqual(a, suite.requests.path("GET", path)-reads, 4, "reads of the Deployment")
		}, "the Package reconciles on its interval, several times")
		assert.Equal(t, before, writes(), "writes to the Deployment")
		assert.Equal(t, int32(4), ptr.Deref(deployment(t).Spec.Replicas, 0))
		readyCondition(t, pkg)
		assert.Nil(t, apimeta.FindStatusCondition(pkg.Status.Conditions, v1alpha1.DriftedCondition), "an ignored field is not drift")
		assert.Nil(t, pkg.Status.Drift)
	})

	t.Run("a revision changing another field keeps the autoscaler's replicas", func(t *testing.T) {
		revise(t, scaledPackage("5", "v3"), "v3")
		d := deployment(t)
		assert.Equal(t, "v3", d.Annotations["example.com/version"])
		assert.Equal(t, int32(4), ptr.Deref(d.Spec.Replicas, 0))
		assert.True(t, claims(d, "e2e-autoscaler"))
	})

	t.Run("a field the Package spec ignores is left too", func(t *testing.T) {
		// The user ignores the version annotation on this Deployment by name; another manager
		// changes it, and a revision that changes the replicas' neighbour keeps it.
		updateObject(t, pkg, func() {
			pkg.Spec.IgnoreFields = []v1alpha1.IgnoreFields{{Group: "apps", Kind: "Deployment", Name: "web",
				JSONPointers: []string{"/metadata/annotations/example.com~1version"}}}
		})
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
		}, "the Package takes the rule")
		d := deployment(t)
		patch := client.MergeFrom(d.DeepCopy())
		d.Annotations["example.com/version"] = "by-hand"
		require.NoError(t, suite.mgmtClient.Patch(t.Context(), d, patch, client.FieldOwner("e2e-editor")))
		markDeploymentAvailable(t, suite.mgmtClient, ns, "web")
		v4 := scaledPackage("5", "v4")
		v4["deploy.yaml"] = strings.Replace(v4["deploy.yaml"], "  annotations:\n", "  labels: {tier: web}\n  annotations:\n", 1)
		digest := pushPackage(t, writePackage(t, v4), repo)
		eventually(t, func(a *attempt) {
			assert.Equal(a, "web", deployment(a).Labels["tier"])
		}, "the revision is written")
		markDeploymentAvailable(t, suite.mgmtClient, ns, "web")
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			assert.Equal(a, digest, pkg.Status.LastAppliedRevision)
		}, "the revision is applied")
		d = deployment(t)
		assert.Equal(t, "by-hand", d.Annotations["example.com/version"])
		assert.Equal(t, int32(4), ptr.Deref(d.Spec.Replicas, 0))
	})
}

// TestIgnoreFieldsRefused checks that a JSON pointer that is not one is refused with the place
// it is named: by the API server for a Package's spec, by the render for a manifest.
func TestIgnoreFieldsRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pkg := newPackage(ns, "bad", suite.registry.Host+"/e2e/"+ns+"/bad:v1", "")
	pkg.Spec.IgnoreFields = []v1alpha1.IgnoreFields{{Group: "apps", Kind: "Deployment", JSONPointers: []string{"/spec/replicas", "spec/replicas"}}}
	err := suite.mgmtClient.Create(t.Context(), pkg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.ignoreFields[0].jsonPointers[1]")

	repo := "e2e/" + ns + "/bad:v1"
	files := scaledPackage("1", "v1")
	files["manifest.yaml"] = strings.Replace(files["manifest.yaml"], `["/spec/replicas"]`, `["/spec/replicas", "/spec/~2"]`, 1)
	pushPackage(t, writePackage(t, files), repo)
	pkg = newPackage(ns, "bad", suite.registry.Host+"/"+repo, "")
	createPackage(t, pkg)
	waitForReadyMessage(t, pkg, metav1.ConditionFalse, v1alpha1.RenderFailedReason, "spec.ignoreFields[0].jsonPointers[1]")

	// A JSON pointer pkgsync cannot leave to others: the schema lets it through, the
	// controller stalls on it before asking the registry anything.
	pkg = newPackage(ns, "name", suite.registry.Host+"/"+repo, "")
	pkg.Spec.IgnoreFields = []v1alpha1.IgnoreFields{{Kind: "ConfigMap", JSONPointers: []string{"/metadata/name"}}}
	createPackage(t, pkg)
	waitForReadyMessage(t, pkg, metav1.ConditionFalse, v1alpha1.InvalidSpecReason, "spec.ignoreFields[0].jsonPointers[0]")
	assert.True(t, apimeta.IsStatusConditionTrue(pkg.Status.Conditions, "Stalled"))
}
