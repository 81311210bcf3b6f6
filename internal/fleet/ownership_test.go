package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
)

// TestFleetRecognition is the rule by which a fleet's deletion (and its pass) tells its own
// members and copies from everything else labelled with it: the fleet's label and its UID, in
// the annotation pkgsync.dev/fleet-uid (which no garbage collector takes off) or an
// ownerReference (which one does, and which the fleet sets only with deletionPolicy Delete). A
// tenant who may write only to their own namespace, or anyone who labels an object in a
// member's namespace, knows the fleet's name but not its UID: whatever else their object says,
// it is not the fleet's, and is never deleted, released or written over.
func TestFleetRecognition(t *testing.T) {
	t.Parallel()
	fleet := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "addon", UID: "fleet-uid"}}
	owner := []metav1.OwnerReference{fleetOwnerReference(fleet)}
	forged := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind, Name: "addon", UID: "guessed"}}
	uid := func(u string) map[string]string { return map[string]string{v1alpha1.FleetUIDAnnotation: u} }
	meta := func(ns, name, label string, annotations map[string]string, refs []metav1.OwnerReference) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations, OwnerReferences: refs}
		if label != "" {
			m.Labels = map[string]string{v1alpha1.FleetLabel: label}
		}
		return m
	}
	tests := []struct {
		name string
		meta metav1.ObjectMeta
		// member and copy: whether a Package, a Secret with that metadata is the fleet's.
		member, copy bool
	}{
		{"written with deletionPolicy Delete: label, UID and ownerReference", meta("clusters-a", "addon", "addon", uid("fleet-uid"), owner), true, true},
		{"written with Orphan, or its ownerReference taken off by the garbage collector: label and UID", meta("clusters-a", "addon", "addon", uid("fleet-uid"), nil), true, true},
		{"written by an older pkgsync: label and ownerReference", meta("clusters-a", "addon", "addon", nil, owner), true, true},
		{"a member whose cluster left the fleet: its UID, whatever the namespace", meta("clusters-gone", "addon", "addon", uid("fleet-uid"), nil), true, true},
		{"a copy of a Secret the fleet no longer names", meta("clusters-a", "old-pull", "addon", uid("fleet-uid"), nil), false, true},

		{"a tenant's object named like the fleet's, labelled with it", meta("tenant", "addon", "addon", nil, nil), false, false},
		{"the same in a member's namespace (someone else's: a Collision)", meta("clusters-a", "addon", "addon", nil, nil), false, false},
		{"a guessed UID", meta("tenant", "addon", "addon", uid("guessed"), nil), false, false},
		{"an ownerReference to the fleet's name with a guessed UID", meta("tenant", "addon", "addon", nil, forged), false, false},
		{"an empty UID", meta("tenant", "addon", "addon", uid(""), nil), false, false},
		{"the fleet's UID, labelled for another fleet", meta("clusters-a", "addon", "other", uid("fleet-uid"), nil), false, false},
		{"the fleet's UID, its label taken off", meta("clusters-a", "addon", "", uid("fleet-uid"), owner), false, false},
		{"a Package of another name with the fleet's UID", meta("clusters-a", "mine", "addon", uid("fleet-uid"), nil), false, true},
		{"an earlier fleet of the same name (another UID)", meta("clusters-a", "addon", "addon", uid("earlier-uid"),
			[]metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind, Name: "addon", UID: "earlier-uid"}}), false, false},
	}
	for _, tt := range tests {
		pkg := &v1alpha1.Package{ObjectMeta: *tt.meta.DeepCopy()}
		secret := &corev1.Secret{ObjectMeta: *tt.meta.DeepCopy()}
		assert.Equal(t, tt.member, IsFleetMember(pkg, fleet), "member: %s", tt.name)
		assert.Equal(t, tt.copy, isFleetCopy(secret, fleet), "copy: %s", tt.name)
	}

	// A fleet without a UID (not from the API server) has nothing to prove.
	noUID := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "addon"}}
	assert.False(t, IsFleetMember(&v1alpha1.Package{ObjectMeta: meta("tenant", "addon", "addon", uid(""), nil)}, noUID))
	assert.False(t, isFleetCopy(&corev1.Secret{ObjectMeta: meta("tenant", "pull", "addon", nil, []metav1.OwnerReference{{Name: "addon"}})}, noUID))
}

// TestFleetOwnersFollowTheDeletionPolicy: a member is written with the fleet's UID annotated
// and, with deletionPolicy Delete only, controlled by the fleet; with Orphan it has no
// ownerReference to the fleet, so that no cascade of kubectl delete can delete it. Changing
// the policy is drift, written back once: the reference goes or comes, other owners stay.
func TestFleetOwnersFollowTheDeletionPolicy(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keeper", UID: "keeper-uid"}
	for _, from := range []v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionDelete, v1alpha1.FleetDeletionOrphan} {
		to := map[v1alpha1.FleetDeletionPolicy]v1alpha1.FleetDeletionPolicy{v1alpha1.FleetDeletionDelete: v1alpha1.FleetDeletionOrphan, v1alpha1.FleetDeletionOrphan: v1alpha1.FleetDeletionDelete}[from]
		t.Run(string(from)+" to "+string(to), func(t *testing.T) {
			t.Parallel()
			fleet := fleetOn("example.com/addon:v1", nil, nil)
			fleet.Spec.DeletionPolicy = from
			src := fleetRevisionSource{name: "abc-def", image: "example.com/addon:v1@sha256:0000", template: &fleet.Spec.Template}
			m := &rollout.Member{Namespace: "clusters-a"}
			desired, err := desiredMember(fleet, src, m, time.Now())
			require.NoError(t, err)
			assert.Equal(t, "fleet-uid", desired.Annotations[v1alpha1.FleetUIDAnnotation])
			assertFleetOwners(t, from, desired.OwnerReferences)

			c := fake.NewClientBuilder().WithScheme(scheme).Build()
			desired.UID = "member-uid" // the fake client gives none
			_, err = writeMember(t.Context(), c, fleet, nil, desired)
			require.NoError(t, err)
			existing := &v1alpha1.Package{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(desired), existing))
			existing.OwnerReferences = append(existing.OwnerReferences, other)
			require.NoError(t, c.Update(t.Context(), existing))
			assert.True(t, memberUpToDate(existing, desired, fleet), "another owner is no drift")

			fleet.Spec.DeletionPolicy = to
			desired, err = desiredMember(fleet, src, m, time.Now())
			require.NoError(t, err)
			assert.False(t, memberUpToDate(existing, desired, fleet), "the policy changed: drift")
			_, err = writeMember(t.Context(), c, fleet, existing, desired)
			require.NoError(t, err)
			written := &v1alpha1.Package{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(desired), written))
			assert.True(t, memberUpToDate(written, desired, fleet), "written back once")
			assert.Contains(t, written.OwnerReferences, other, "other owners stay")
			var fleetRefs []metav1.OwnerReference
			for _, ref := range written.OwnerReferences {
				if ref.UID != other.UID {
					fleetRefs = append(fleetRefs, ref)
				}
			}
			assertFleetOwners(t, to, fleetRefs)
		})
	}
}

func assertFleetOwners(t *testing.T, policy v1alpha1.FleetDeletionPolicy, refs []metav1.OwnerReference) {
	t.Helper()
	if policy == v1alpha1.FleetDeletionOrphan {
		assert.Empty(t, refs, "no ownerReference to the fleet with Orphan")
		return
	}
	if assert.Len(t, refs, 1) {
		assert.Equal(t, "fleet-uid", string(refs[0].UID))
		assert.True(t, ptr.Deref(refs[0].Controller, false), "the fleet controls the member with Delete")
	}
}

// TestFleetOwnershipOfMembersLeftAsTheyAre: a member the rollout leaves as it is (held here)
// is not moved, but its ownership follows the deletionPolicy all the same: switched to Orphan,
// the fleet takes its ownerReference off (else kubectl delete --cascade=foreground would delete
// it) and annotates its UID (a member written before pkgsync.dev/fleet-uid), and writes
// nothing else; a member that has them costs no request.
func TestFleetOwnershipOfMembersLeftAsTheyAre(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	fleet := fleetOn("example.com/addon:v1", nil, nil)
	fleet.Spec.DeletionPolicy = v1alpha1.FleetDeletionOrphan
	held := &v1alpha1.Package{
		ObjectMeta: metav1.ObjectMeta{Namespace: "clusters-a", Name: "addon", UID: "member-uid",
			Labels:          map[string]string{v1alpha1.FleetLabel: "addon"},
			Annotations:     map[string]string{v1alpha1.HoldAnnotation: "change freeze", v1alpha1.FleetRevisionAnnotation: "old-rev"},
			OwnerReferences: []metav1.OwnerReference{fleetOwnerReference(fleet)}},
		Spec: v1alpha1.PackageSpec{Image: "example.com/addon:v1@sha256:0000"},
	}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(held).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	m := &rollout.Member{Namespace: "clusters-a", Pkg: &v1alpha1.Package{}}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(held), m.Pkg))
	before := m.Pkg.DeepCopy()

	require.NoError(t, keepOwnership(t.Context(), c, m, fleet))
	got := &v1alpha1.Package{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(held), got))
	assert.Empty(t, got.OwnerReferences, "no ownerReference with Orphan")
	assert.Equal(t, "fleet-uid", got.Annotations[v1alpha1.FleetUIDAnnotation])
	assert.Equal(t, before.Spec, got.Spec, "the spec is the hold's")
	assert.Equal(t, before.Labels, got.Labels)
	delete(got.Annotations, v1alpha1.FleetUIDAnnotation)
	assert.Equal(t, before.Annotations, got.Annotations, "the revision and the hold are left as they are")
	assert.Equal(t, 1, patches)

	m.Pkg = got
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(held), m.Pkg))
	require.NoError(t, keepOwnership(t.Context(), c, m, fleet))
	assert.Equal(t, 1, patches, "nothing more to write")
}
