package fleet

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
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
	member := func(ns, tier string) *rollout.Member {
		lbls := map[string]string{"tier": tier}
		return &rollout.Member{Namespace: ns, Labels: lbls, Cluster: &hosted.HostedCluster{Name: ns, Namespace: "clusters", ControlPlaneNamespace: ns, Labels: lbls}}
	}
	good, bad := member("clusters-a", "gold"), member("clusters-b", "bronze")

	_, k1, _, err := (&fleetSteps{}).preflightOptions(t.Context(), fleet, src, good, now)
	require.NoError(t, err)
	_, k2, _, err := (&fleetSteps{}).preflightOptions(t.Context(), fleet, src, good, now.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, k1, k2, "the revision time is not part of the environment")
	_, kBad, _, err := (&fleetSteps{}).preflightOptions(t.Context(), fleet, src, bad, now)
	require.NoError(t, err)
	assert.NotEqual(t, k1, kBad, "a HostedCluster label is")

	r := &fleetSteps{}
	r.preflights.put(fleet.Name, target.Name, map[string]preflightVerdict{k1: {}, kBad: {reason: v1alpha1.RenderFailedReason, message: "no bronze"}})
	failed, err := r.preflight(t.Context(), fleet, target, []*rollout.Member{good, bad}, now)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	assert.Equal(t, "clusters-b", failed[0].Namespace)
	assert.Equal(t, "preflight: no bronze", failed[0].Message)
	assert.Len(t, r.preflights.get(fleet.Name, target.Name), 2, "one verdict per member")
	assert.Nil(t, r.preflights.get(fleet.Name, "another-revision"), "verdicts are about one revision")

	o := preflightOutcome(target.Name, failed)
	assert.Equal(t, v1alpha1.PreflightFailedReason, o.Reason)
	assert.Contains(t, o.Message, "clusters-b: RenderFailed: preflight: no bronze")
}

// TestPreflightReadsConfigFrom: a member's preflight merges the template's spec.configFrom as
// the member Package will, from the member's own namespace: what a member's ConfigMap says is
// rendered, a member without it fails as its Package would (ConfigSourceNotFound), a changed
// source is a new environment, and a render error never carries a value of a member's Secret.
func TestPreflightReadsConfigFrom(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "addon", UID: "u"},
		Spec: v1alpha1.HostedClusterPackageSpec{Template: v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{
			Image: "r.example/addon:stable",
			ConfigFrom: []v1alpha1.ConfigSource{
				{Kind: "ConfigMap", Name: "addon-config"},
				{Kind: "Secret", Name: "addon-secret", Optional: true},
			},
		}}},
	}
	target := &v1alpha1.FleetRevision{Name: "aaaaaaaaaaaa-bbbbbbbb", Image: "r.example/addon:stable@sha256:aaaa"}
	src := fleetRevisionSource{name: target.Name, image: target.Image, template: &fleet.Spec.Template}
	member := func(ns string) *rollout.Member {
		return &rollout.Member{Namespace: ns, Cluster: &hosted.HostedCluster{Name: ns, Namespace: "clusters", ControlPlaneNamespace: ns}}
	}
	configMap := func(ns, values string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addon-config"}, Data: map[string]string{"config.yaml": values}}
	}
	c := fake.NewClientBuilder().WithObjects(
		configMap("clusters-a", "greeting: bonjour\n"),
		configMap("clusters-s", "greeting: hello\n"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters-s", Name: "addon-secret"}, Data: map[string][]byte{"config.yaml": []byte("token: s3cret-token-value\n")}},
	).Build()
	r := &fleetSteps{apiReader: c}

	ro, key, _, err := r.preflightOptions(t.Context(), fleet, src, member("clusters-a"), now)
	require.NoError(t, err)
	assert.JSONEq(t, `{"greeting":"bonjour"}`, string(ro.Config), "the member's own ConfigMap")

	_, _, _, err = r.preflightOptions(t.Context(), fleet, src, member("clusters-none"), now)
	require.Error(t, err)
	assert.Equal(t, v1alpha1.ConfigSourceNotFoundReason, reconciler.ReasonFor(err))

	changed := configMap("clusters-a", "greeting: hola\n")
	require.NoError(t, c.Update(t.Context(), changed))
	_, key2, _, err := r.preflightOptions(t.Context(), fleet, src, member("clusters-a"), now)
	require.NoError(t, err)
	assert.NotEqual(t, key, key2, "a changed source is another environment")

	// A template that quotes its configuration in an error: the fleet's status is read by more
	// than may read the member's Secret.
	fsys := fstest.MapFS{
		"manifest.yaml":  {Data: []byte("apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: addon\nspec:\n  phases:\n  - name: deploy\n")},
		"cm.yaml.gotmpl": {Data: []byte("{{ fail (printf \"bad token %s\" .config.token) }}\n")},
	}
	ro, _, config, err := r.preflightOptions(t.Context(), fleet, src, member("clusters-s"), now)
	require.NoError(t, err)
	_, err = applier.PreflightRender(t.Context(), fsys, ro)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "s3cret-token-value", "the render saw the Secret's value")
	msg := config.Redact(err).Error()
	assert.NotContains(t, msg, "s3cret-token-value")
	assert.Contains(t, msg, "[redacted]")
}
