package packages

import (
	"errors"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

func depPackage(name string, ready bool, deps ...v1alpha1.Dependency) *v1alpha1.Package {
	p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 1},
		Spec: v1alpha1.PackageSpec{Image: "r.example/p:v1", DependsOn: deps}}
	p.Status.ObservedGeneration = 1
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	p.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: status, Reason: "R"}}
	p.Status.LastAppliedTag = "v1"
	return p
}

func depClusterPackage(name string, ready bool, deps ...v1alpha1.Dependency) *v1alpha1.ClusterPackage {
	p := depPackage(name, ready, deps...)
	p.Namespace = ""
	return &v1alpha1.ClusterPackage{ObjectMeta: p.ObjectMeta, Spec: p.Spec, Status: p.Status}
}

func dependencyClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&v1alpha1.Package{}, dependsOnIndex, indexDependsOn(v1alpha1.PackageKind)).
		WithIndex(&v1alpha1.ClusterPackage{}, dependsOnIndex, indexDependsOn(v1alpha1.ClusterPackageKind)).Build()
}

func on(name string) v1alpha1.Dependency { return v1alpha1.Dependency{Name: name} }

func TestDependencyCheck(t *testing.T) {
	t.Parallel()
	stale := depPackage("stale", true)
	stale.Generation = 2
	tests := []struct {
		name    string
		objects []client.Object
		self    packageObject
		kind    string
		reason  string // "" when ready
		text    string
	}{
		{name: "ready", objects: []client.Object{depPackage("a", true)}, self: depPackage("me", false, on("a")), kind: v1alpha1.PackageKind},
		{name: "not ready", objects: []client.Object{depPackage("a", false)}, self: depPackage("me", false, on("a")), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyNotReadyReason, text: "Package ns/a is not Ready (R)"},
		{name: "missing", self: depPackage("me", false, on("a")), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyNotReadyReason, text: "Package ns/a does not exist"},
		{name: "ready at an older generation", objects: []client.Object{stale}, self: depPackage("me", false, on("stale")), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyNotReadyReason, text: "has not applied its current generation"},
		{name: "a ClusterPackage", objects: []client.Object{depClusterPackage("c", true)},
			self: depPackage("me", false, v1alpha1.Dependency{Kind: v1alpha1.ClusterPackageKind, Name: "c"}), kind: v1alpha1.PackageKind},
		{name: "cycle", objects: []client.Object{depPackage("a", true, on("b")), depPackage("b", true, on("me"))},
			self: depPackage("me", false, on("a")), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyCycleReason, text: "dependency cycle: Package ns/me → Package ns/a → Package ns/b → Package ns/me"},
		{name: "itself", self: depPackage("me", false, on("me")), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyCycleReason, text: "Package ns/me → Package ns/me"},
		{name: "a cycle elsewhere is not this one's", objects: []client.Object{depPackage("a", true, on("b")), depPackage("b", true, on("a"))},
			self: depPackage("me", false, on("a")), kind: v1alpha1.PackageKind},
		{name: "a ClusterPackage on a Package", self: depClusterPackage("me", false, v1alpha1.Dependency{Kind: v1alpha1.PackageKind, Name: "a"}),
			kind: v1alpha1.ClusterPackageKind, reason: v1alpha1.InvalidDependencyReason, text: "ClusterPackages only"},
		{name: "readyExpr true", objects: []client.Object{depPackage("a", false)},
			self: depPackage("me", false, v1alpha1.Dependency{Name: "a", ReadyExpr: "dep.status.lastAppliedTag == 'v1' && self.metadata.name == 'me'"}), kind: v1alpha1.PackageKind},
		{name: "readyExpr false", objects: []client.Object{depPackage("a", true)},
			self: depPackage("me", false, v1alpha1.Dependency{Name: "a", ReadyExpr: "dep.status.lastAppliedTag == 'v2'"}), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyNotReadyReason, text: "Package ns/a: readyExpr is false"},
		{name: "readyExpr on a field not written yet", objects: []client.Object{depPackage("a", true)},
			self: depPackage("me", false, v1alpha1.Dependency{Name: "a", ReadyExpr: "dep.status.lastAppliedFrom == 'x'"}), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyNotReadyReason},
		{name: "readyExpr does not see the spec", objects: []client.Object{depPackage("a", true)},
			self: depPackage("me", false, v1alpha1.Dependency{Name: "a", ReadyExpr: "has(dep.spec)"}), kind: v1alpha1.PackageKind,
			reason: v1alpha1.DependencyNotReadyReason},
		{name: "readyExpr that does not compile", objects: []client.Object{depPackage("a", true)},
			self: depPackage("me", false, v1alpha1.Dependency{Name: "a", ReadyExpr: "dep.status.("}), kind: v1alpha1.PackageKind,
			reason: v1alpha1.InvalidDependencyReason},
		{name: "readyExpr that is not a bool", objects: []client.Object{depPackage("a", true)},
			self: depPackage("me", false, v1alpha1.Dependency{Name: "a", ReadyExpr: "'x'"}), kind: v1alpha1.PackageKind,
			reason: v1alpha1.InvalidDependencyReason},
		{name: "readyExpr over its cost", objects: []client.Object{depPackage("a", true)},
			self: depPackage("me", false, v1alpha1.Dependency{Name: "a",
				ReadyExpr: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, a+b+c+d+e > 0)))))"}),
			kind: v1alpha1.PackageKind, reason: v1alpha1.InvalidDependencyReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &dependencies{reader: dependencyClient(t, tt.objects...), exprs: newReadyExprs()}
			err := d.check(t.Context(), tt.self, tt.kind)
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var de *dependencyError
			require.True(t, errors.As(err, &de), "%v", err)
			assert.Equal(t, tt.reason, de.reason)
			if tt.reason != v1alpha1.DependencyNotReadyReason {
				assert.Equal(t, tt.reason, reconciler.ReasonFor(err))
				assert.True(t, reconciler.IsStalling(reconciler.ReasonFor(err)))
			}
			assert.Contains(t, err.Error(), tt.text)
		})
	}
}

func TestDependencyChainTooDeep(t *testing.T) {
	t.Parallel()
	var objs []client.Object
	for i := range maxDependencyDepth + 2 {
		objs = append(objs, depPackage(string(rune('a'+i)), true, on(string(rune('a'+i+1)))))
	}
	d := &dependencies{reader: dependencyClient(t, objs...), exprs: newReadyExprs()}
	err := d.check(t.Context(), depPackage("me", false, on("a")), v1alpha1.PackageKind)
	assert.Equal(t, v1alpha1.InvalidDependencyReason, reconciler.ReasonFor(err))
}

func TestDependentsBeingDeleted(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	deleting := func(p *v1alpha1.Package) *v1alpha1.Package {
		p.DeletionTimestamp = &now
		p.Finalizers = []string{v1alpha1.FinalizerName}
		return p
	}
	base := depPackage("base", true)
	objs := []client.Object{
		base,
		deleting(depPackage("leaving", true, on("base"))),
		depPackage("staying", true, on("base")),
		deleting(depPackage("unrelated", true)),
		deleting(&v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x"}, Spec: v1alpha1.PackageSpec{DependsOn: []v1alpha1.Dependency{on("base")}}}),
	}
	d := &dependencies{reader: dependencyClient(t, objs...), exprs: newReadyExprs()}
	waiting, err := d.dependentsBeingDeleted(t.Context(), base, v1alpha1.PackageKind)
	require.NoError(t, err)
	assert.Equal(t, []string{"Package ns/leaving"}, waiting)

	// In a cycle neither waits for the other.
	a := deleting(depPackage("a", true, on("b")))
	b := deleting(depPackage("b", true, on("a")))
	d = &dependencies{reader: dependencyClient(t, a, b), exprs: newReadyExprs()}
	waiting, err = d.dependentsBeingDeleted(t.Context(), a, v1alpha1.PackageKind)
	require.NoError(t, err)
	assert.Empty(t, waiting)

	// A ClusterPackage waits for the Packages of any namespace that depend on it.
	cp := depClusterPackage("platform", true)
	dependent := deleting(depPackage("tenant", true, v1alpha1.Dependency{Kind: v1alpha1.ClusterPackageKind, Name: "platform"}))
	d = &dependencies{reader: dependencyClient(t, cp, dependent), exprs: newReadyExprs()}
	waiting, err = d.dependentsBeingDeleted(t.Context(), cp, v1alpha1.ClusterPackageKind)
	require.NoError(t, err)
	assert.Equal(t, []string{"Package ns/tenant"}, waiting)
}
