package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestDriftReported installs a package with driftPolicy Report, lets another field manager edit
// one of its objects, and counts: the Package reports the object and the changed field, and
// pkgsync sends that object no write over several reconciles. A new revision of the object is
// then applied.
func TestDriftReported(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "e2e/" + ns + "/cms:stable"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "one", "two")), repo)
	pkg := newPackage(ns, "cms", suite.registry.Host+"/"+repo, "")
	pkg.Spec.DriftPolicy = v1alpha1.DriftReport
	pkg.Spec.Interval = &metav1.Duration{Duration: time.Second}
	createPackage(t, pkg)
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Nil(t, apimeta.FindStatusCondition(pkg.Status.Conditions, v1alpha1.DriftedCondition), "no drift yet")

	// Someone edits "two" with a field manager of their own (kubectl edit does an update).
	var cm corev1.ConfigMap
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "two"}, &cm))
	cm.Data["name"] = "edited"
	require.NoError(t, suite.mgmtClient.Update(t.Context(), &cm, client.FieldOwner("e2e-editor")))

	path := "/api/v1/namespaces/" + ns + "/configmaps/two"
	writes := func() int {
		return suite.requests.path("PATCH", path) + suite.requests.path("PUT", path) + suite.requests.path("DELETE", path)
	}
	before, reads := writes(), suite.requests.path("GET", path)
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		c := apimeta.FindStatusCondition(pkg.Status.Conditions, v1alpha1.DriftedCondition)
		if assert.NotNil(a, c, "Drifted condition") {
			assert.Equal(a, metav1.ConditionTrue, c.Status)
			assert.Equal(a, v1alpha1.DriftDetectedReason, c.Reason)
			assert.Contains(a, c.Message, "ConfigMap "+ns+"/two (/data/name)")
		}
		if assert.NotNil(a, pkg.Status.Drift) {
			assert.Equal(a, int32(1), pkg.Status.Drift.Count)
			assert.Equal(a, []v1alpha1.DriftedObject{{Object: "ConfigMap " + ns + "/two", Paths: []string{"/data/name"}}}, pkg.Status.Drift.Objects)
		}
	}, "the Package reports the drifted field")
	eventually(t, func(a *attempt) {
		assert.GreaterOrEqual(a, suite.requests.path("GET", path)-reads, 4, "reads of the drifted object")
	}, "the Package reconciles on its interval, several times")
	assert.Equal(t, before, writes(), "writes to the drifted object while drift is reported")
	assert.Equal(t, "edited", configMapData(t, ns, "two")["name"], "the drift is left as it is")
	readyCondition(t, pkg)
	assert.Equal(t, metav1.ConditionTrue, readyCondition(t, pkg).Status, "drift does not make the Package not Ready")

	var events corev1.EventList
	require.NoError(t, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(ns)))
	drifted := 0
	for _, e := range events.Items {
		if e.Reason == v1alpha1.DriftDetectedReason && e.InvolvedObject.Name == pkg.Name {
			drifted += int(e.Count)
			assert.Equal(t, corev1.EventTypeWarning, e.Type)
		}
	}
	assert.Equal(t, 1, drifted, "one event for the transition, not one per reconcile")
	assert.Equal(t, 1.0, driftedObjectsMetric(t, ns, pkg.Name), "pkgsync_drifted_objects")

	t.Run("a new revision is applied", func(t *testing.T) {
		v2 := configMapsPackage("", nil, "one", "two")
		v2["objects.yaml"] = strings.ReplaceAll(v2["objects.yaml"], "\ndata:\n", "\ndata:\n  version: v2\n")
		digest2 := pushPackage(t, writePackage(t, v2), repo)
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			assert.Equal(a, digest2, pkg.Status.LastAppliedRevision)
			assert.Nil(a, apimeta.FindStatusCondition(pkg.Status.Conditions, v1alpha1.DriftedCondition))
			assert.Nil(a, pkg.Status.Drift)
		}, "the new revision is applied and the drift is gone")
		assert.Equal(t, map[string]string{"name": "two", "version": "v2"}, configMapData(t, ns, "two"))
		assert.Equal(t, 0.0, driftedObjectsMetric(t, ns, pkg.Name), "pkgsync_drifted_objects")
	})
}

// driftedObjectsMetric reads pkgsync_drifted_objects of a Package from the in-process
// controller's registry; -1 when there is no such series.
func driftedObjectsMetric(t *testing.T, ns, name string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "pkgsync_drifted_objects" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == v1alpha1.PackageKind && labels["namespace"] == ns && labels["name"] == name {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
