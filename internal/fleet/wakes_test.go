package fleet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// builderIndexer registers the indexes a setup function asks for on a fake client's builder, so
// that the test reads through the same index (hosted.IndexHostedClusters) the manager has.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	i.b.WithIndex(obj, field, extract)
	return nil
}

// TestFleetWakes is the attack of issue 41 (5): a tenant who may write only to their own
// namespace labels a Package or a Secret pkgsync.dev/fleet=addon and edits it in a loop; each
// change must not cost a fleet pass (an uncached read of the fleet's Secrets and a list of every
// HostedCluster). The fleet's real members and copies still wake it, including a member whose
// owner reference the garbage collector took off (kubectl delete --cascade=orphan).
func TestFleetWakes(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	fleet := fleetOn("registry.example.com/addons/addon:v1", nil, nil)
	selected := map[string]string{"tier": "prod"}
	fleet.Spec.HostedClusterSelector = &metav1.LabelSelector{MatchLabels: selected}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fleet,
		hostedClusterObj("clusters", "a", selected), hostedClusterObj("clusters", "b", map[string]string{"tier": "dev"}))
	require.NoError(t, hosted.IndexHostedClusters(t.Context(), builderIndexer{b}))
	c := b.Build()
	w := fleetWakes{fleets: c, hostedClusters: c, controlPlanes: c, hostedClusterAPI: true}

	owner := []metav1.OwnerReference{fleetOwnerReference(fleet)}
	forged := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.HostedClusterPackageKind, Name: "addon", UID: "guessed"}}
	labelled := func(fleet string) map[string]string { return map[string]string{v1alpha1.FleetLabel: fleet} }
	pkg := func(ns, name, fleet string, refs []metav1.OwnerReference) client.Object {
		return &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labelled(fleet), OwnerReferences: refs}}
	}
	secret := func(ns, name, fleet string, refs []metav1.OwnerReference) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labelled(fleet), OwnerReferences: refs}}
	}
	annotated := func(o client.Object, uid string) client.Object {
		o.SetAnnotations(map[string]string{v1alpha1.FleetUIDAnnotation: uid})
		return o
	}
	tests := []struct {
		name  string
		obj   client.Object
		wakes bool
	}{
		{"the member", pkg("clusters-a", "addon", "addon", owner), true},
		{"the member, its owner reference taken off by the garbage collector", pkg("clusters-a", "addon", "addon", nil), true},
		{"a member of a cluster gone, being torn down", pkg("clusters-gone", "addon", "addon", owner), true},
		{"the same with deletionPolicy Orphan: no owner reference, the fleet's UID annotated", annotated(pkg("clusters-gone", "addon", "addon", nil), "fleet-uid"), true},
		{"a tenant's Package with a guessed UID annotated", annotated(pkg("tenant", "addon", "addon", nil), "guessed"), false},
		{"a tenant's Package of the fleet's name in the tenant's namespace", pkg("tenant", "addon", "addon", nil), false},
		{"a tenant's Package of another name", pkg("tenant", "mine", "addon", nil), false},
		{"a Package of another name in a member's namespace", pkg("clusters-a", "mine", "addon", nil), false},
		{"a tenant's Package with an owner reference to the fleet's name, not its UID", pkg("tenant", "addon", "addon", forged), false},
		{"a Package in the namespace of a cluster the fleet does not select", pkg("clusters-b", "addon", "addon", nil), false},
		{"a Package labelled for a fleet that does not exist", pkg("tenant", "ghost", "ghost", nil), false},

		{"a copy", secret("clusters-a", "pull", "addon", owner), true},
		{"a copy, its owner reference taken off by the garbage collector", secret("clusters-a", "pull", "addon", nil), true},
		{"a copy in the namespace of a cluster gone", secret("clusters-gone", "pull", "addon", owner), true},
		{"the same with deletionPolicy Orphan", annotated(secret("clusters-gone", "pull", "addon", nil), "fleet-uid"), true},
		{"a tenant's Secret of the copy's name in the tenant's namespace", secret("tenant", "pull", "addon", nil), false},
		{"a tenant's Secret with an owner reference to the fleet's name, not its UID", secret("tenant", "pull", "addon", forged), false},
		{"a Secret the fleet does not copy, in a member's namespace", secret("clusters-a", "other", "addon", nil), false},
		{"a Secret labelled for a fleet that does not exist", secret("tenant", "pull", "ghost", nil), false},
	}
	woken, real := 0, 0
	for _, tt := range tests {
		if tt.wakes {
			real++
		}
		var got []ctrl.Request
		switch o := tt.obj.(type) {
		case *v1alpha1.Package:
			got = w.member(t.Context(), o)
		case *corev1.Secret:
			got = w.copy(t.Context(), o)
		}
		woken += len(got)
		if tt.wakes {
			assert.Equal(t, []ctrl.Request{{NamespacedName: client.ObjectKey{Name: "addon"}}}, got, tt.name)
		} else {
			assert.Empty(t, got, tt.name)
		}
	}
	assert.Equal(t, real, woken, "fleet passes the changes above cost: one per real member or copy")
}
