package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestConfigKeyNotInSchemaIsAWarning: a key of spec.config that the package's schema does not
// declare is dropped, as the API server drops an unknown field, without failing the Package:
// status.warnings and a Warning event say so, naming the nearest declared key.
func TestConfigKeyNotInSchemaIsAWarning(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/app:stable"
	pushPackage(t, writePackage(t, appPackage), "e2e/"+ns+"/app:stable")
	pkg := newPackage(ns, "app", image, `{"message":"kept","mesage":"dropped"}`)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))

	const warning = "config.mesage is not in the package's configuration schema and is dropped; did you mean message?"
	eventually(t, func(a *attempt) {
		cond := readyCondition(a, pkg)
		if assert.NotNil(a, cond) {
			assert.Equal(a, v1alpha1.PhaseProgressingReason, cond.Reason, "the Package goes on")
		}
		assert.Equal(a, []string{warning}, pkg.Status.Warnings)
	})
	assert.Equal(t, "kept", configMapData(t, ns, "app-config")["message"])
	eventually(t, func(a *attempt) {
		var events corev1.EventList
		assert.NoError(a, suite.mgmtClient.List(a.Context(), &events, client.InNamespace(ns)))
		var got []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "app" && e.Reason == v1alpha1.ConfigPrunedReason {
				got = append(got, e.Type+" "+e.Message)
			}
		}
		assert.Equal(a, []string{corev1.EventTypeWarning + " " + warning}, got)
	})
}
