package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/test/testenv"
)

func TestMergedConfig(t *testing.T) {
	t.Parallel()
	got, err := mergedConfig(jsonOf(`{"a":{"x":1,"y":2},"b":"keep"}`), []v1alpha1.ConfigOverride{
		{HostedClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}, Config: jsonOf(`{"a":{"y":3}}`)},
		{HostedClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}}, Config: jsonOf(`{"b":"no"}`)},
	}, map[string]string{"tier": "gold"})
	assert.NoError(t, err)
	assert.JSONEq(t, `{"a":{"x":1,"y":3},"b":"keep"}`, string(got.Raw))
}

func jsonOf(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// TestWithShardLabels: members carry the fleet's values of the shard keys, over the template's,
// and not a key the fleet lacks.
func TestWithShardLabels(t *testing.T) {
	t.Parallel()
	fleet := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"shard": "a", "other": "x"}}}
	member := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"shard": "template", "tier": "t", "missing": "template"}}}
	withShardLabels(member, fleet, []string{"shard", "missing"})
	assert.Equal(t, map[string]string{"shard": "a", "tier": "t"}, member.Labels)
}

// TestMembersTakesAMemberCreatedAfterTheList: a member Package that is not in the list the
// reconcile (or fleet plan) read, because the fleet's controller created it since, is the
// fleet's member, not a collision.
func TestMembersTakesAMemberCreatedAfterTheList(t *testing.T) {
	t.Parallel()
	fleet := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "addon", UID: "fleet-uid"}}
	hc := testenv.HostedCluster("clusters", "hc0")
	member := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{
		Namespace: hosted.ControlPlaneNamespace("clusters", "hc0"), Name: "addon",
		Labels:          map[string]string{v1alpha1.FleetLabel: "addon"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "HostedClusterPackage", Name: "addon", UID: "fleet-uid"}},
	}}
	foreign := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{
		Namespace: hosted.ControlPlaneNamespace("clusters", "hc1"), Name: "addon",
		Labels: map[string]string{v1alpha1.FleetLabel: "addon"},
	}}
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(hc, testenv.HostedCluster("clusters", "hc1"), member, foreign).Build()
	r := &fleetSteps{client: c, apiReader: c}

	members, collisions, err := r.members(t.Context(), fleet, nil)
	require.NoError(t, err)
	require.Len(t, members, 1)
	assert.Equal(t, member.Namespace, members[0].Namespace)
	assert.Equal(t, member.UID, members[0].Pkg.UID)
	require.Len(t, collisions, 1, "a Package without the fleet's UID stays a collision")
	assert.Equal(t, foreign.Namespace, collisions[0].Namespace)
}
