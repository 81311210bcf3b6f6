package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// TestPreflightKeepsVerdicts: a member's verdict is kept under its environment, which the
// revision time does not change and a HostedCluster label does; with every verdict kept, a
// preflight renders nothing and pulls nothing (the fleet has no source client here).
func TestPreflightKeepsVerdicts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "addon", UID: "u"},
		Spec:       v1alpha1.HostedClusterPackageSpec{Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: "r.example/addon:stable"}}},
	}
	target := &v1alpha1.FleetRevision{Name: "aaaaaaaaaaaa-bbbbbbbb", Image: "r.example/addon:stable@sha256:aaaa"}
	src := fleetRevisionSource{name: target.Name, image: target.Image, template: &fleet.Spec.Template}
	member := func(ns, tier string) *fleetMember {
		lbls := map[string]string{"tier": tier}
		return &fleetMember{namespace: ns, labels: lbls, cluster: &hosted.HostedCluster{Name: ns, Namespace: "clusters", ControlPlaneNamespace: ns, Labels: lbls}}
	}
	good, bad := member("clusters-a", "gold"), member("clusters-b", "bronze")

	_, k1, err := preflightOptions(Options{}, fleet, src, good, now)
	require.NoError(t, err)
	_, k2, err := preflightOptions(Options{}, fleet, src, good, now.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, k1, k2, "the revision time is not part of the environment")
	_, kBad, err := preflightOptions(Options{}, fleet, src, bad, now)
	require.NoError(t, err)
	assert.NotEqual(t, k1, kBad, "a HostedCluster label is")

	r := &fleetSteps{}
	r.preflights.put(fleet.Name, target.Name, map[string]preflightVerdict{k1: {}, kBad: {reason: v1alpha1.RenderFailedReason, message: "no bronze"}})
	failed, err := r.preflight(t.Context(), fleet, target, []*fleetMember{good, bad}, now)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	assert.Equal(t, "clusters-b", failed[0].Namespace)
	assert.Equal(t, "preflight: no bronze", failed[0].Message)
	assert.Len(t, r.preflights.get(fleet.Name, target.Name), 2, "one verdict per member")
	assert.Nil(t, r.preflights.get(fleet.Name, "another-revision"), "verdicts are about one revision")

	o := preflightOutcome(target.Name, failed)
	assert.Equal(t, v1alpha1.PreflightFailedReason, o.reason)
	assert.Contains(t, o.message, "clusters-b: RenderFailed: preflight: no bronze")
}
