package e2e

import (
	"net/http"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestFleetStatusWritesPerReconcile counts the status requests of the reconciles a fleet goes
// through: its first reconcile (target, stable revision, counts and conditions all new), a
// reconcile request that changes nothing but its acknowledgement, and a spec change that
// changes nothing but the observed generation (of the status and of its conditions). A fleet that selects no HostedCluster has no
// member whose status would wake it in between, so each step is one reconcile.
func TestFleetStatusWritesPerReconcile(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "fleet-counting/" + ns
	digest := pushPackage(t, writePackage(t, fleetPackage("1", false)), repo+":v1")
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "count-" + ns[len(ns)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": "nobody-" + ns}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: suite.registry.Host + "/" + repo + ":v1"}},
		},
	}
	statusPath := "/apis/" + v1alpha1.GroupVersion.String() + "/hostedclusterpackages/" + fleet.Name + "/status"
	statusWrites := func() int {
		return suite.requests.path(http.MethodPatch, statusPath) + suite.requests.path(http.MethodPut, statusPath)
	}
	newFleet(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest)
	// Flux's SerialPatcher, which the fleet used before it joined the shared lifecycle, wrote 2
	// here and 2 for the spec change below (the conditions, then the rest of the status).
	assert.Equal(t, 1, statusWrites(), "status writes of the first reconcile: conditions and the rest of the status in one request")

	before := statusWrites()
	got := waitForFleetRequest(t, fleet)
	assert.True(t, conditions.IsReady(got))
	assert.Equal(t, 1, statusWrites()-before, "status writes of a reconcile request that changes nothing else")

	before = statusWrites()
	updateFleet(t, fleet, func(f *v1alpha1.HostedClusterPackage) { f.Spec.Rollout.Paused = true })
	eventually(t, func(a *attempt) {
		f := &v1alpha1.HostedClusterPackage{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(fleet), f)) {
			assert.Equal(a, f.Generation, f.Status.ObservedGeneration)
			assert.Equal(a, f.Annotations[meta.ReconcileRequestAnnotation], f.Status.LastHandledReconcileAt)
		}
	}, "the fleet observes its new generation")
	assert.Equal(t, 1, statusWrites()-before, "status writes of a spec change: the conditions (their observedGeneration) and the rest of the status in one request")
}
