package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// basePackage is a package whose Deployment is available only when the test says so
// (markDeploymentAvailable): until then its Package is not Ready.
var basePackage = map[string]string{
	"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: base\nspec:\n  phases:\n  - name: deploy\n",
	"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: base
  annotations:
    pkgsync.dev/phase: deploy
spec:
  selector:
    matchLabels: {app: base}
  template:
    metadata:
      labels: {app: base}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`,
}

// heldPackage is a one-phase package of one ConfigMap that carries a finalizer of the test's:
// deleting it (the Package's teardown) waits until the test removes the finalizer.
var heldPackage = map[string]string{
	"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: held\nspec:\n  phases:\n  - name: config\n",
	"held.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  finalizers: [e2e.pkgsync.dev/hold]
  annotations:
    pkgsync.dev/phase: config
data:
  k: v
`,
}

func dependsOn(p *v1alpha1.Package, names ...string) *v1alpha1.Package {
	for _, n := range names {
		p.Spec.DependsOn = append(p.Spec.DependsOn, v1alpha1.Dependency{Name: n})
	}
	return p
}

// TestDependsOnOrder: a Package that depends on another applies nothing while that one is
// missing or not Ready (DependencyNotReady, naming it), and applies at once when it becomes
// Ready: both have a 1h interval and the wait requeues at the interval, so only the watch on the
// dependency can explain the wake-up.
func TestDependsOnOrder(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	baseImage := suite.registry.Host + "/e2e/" + ns + "/base:v1"
	pushPackage(t, writePackage(t, basePackage), "e2e/"+ns+"/base:v1")
	appImage := suite.registry.Host + "/e2e/" + ns + "/app:v1"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "app-cm")), "e2e/"+ns+"/app:v1")

	app := dependsOn(newPackage(ns, "app", appImage, ""), "base")
	createPackage(t, app)
	cond := waitForReadyMessage(t, app, metav1.ConditionFalse, v1alpha1.DependencyNotReadyReason, "Package "+ns+"/base does not exist")
	assert.Contains(t, cond.Message, "nothing applied")
	assert.Empty(t, app.Status.LastAttemptedRevision, "nothing resolved while waiting")

	base := newPackage(ns, "base", baseImage, "")
	createPackage(t, base)
	waitForReady(t, base, metav1.ConditionFalse, v1alpha1.PhaseProgressingReason)
	// The dependency exists and applied its Deployment, which is not available: the dependent
	// still waits, naming the dependency's reason, and has applied nothing.
	waitForReadyMessage(t, app, metav1.ConditionFalse, v1alpha1.DependencyNotReadyReason, "Package "+ns+"/base is not Ready (PhaseProgressing)")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-cm"), "the dependent applied before its dependency was Ready")

	markDeploymentAvailable(t, suite.mgmtClient, ns, "base")
	waitForReady(t, base, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	waitForReady(t, app, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-cm"))

	// Applied in order: the dependent's object was created after the dependency became Ready.
	var cm corev1.ConfigMap
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "app-cm"}, &cm))
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(base), base))
	ready := apimeta.FindStatusCondition(base.Status.Conditions, meta.ReadyCondition)
	require.NotNil(t, ready)
	assert.False(t, cm.CreationTimestamp.Before(&ready.LastTransitionTime), "app-cm created at %s, before base was Ready at %s", cm.CreationTimestamp, ready.LastTransitionTime)
}

// TestDependsOnCycle: a cycle of dependencies is refused, stalled, with the cycle named; breaking
// it lets both apply.
func TestDependsOnCycle(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := func(name string) string {
		pushPackage(t, writePackage(t, configMapsPackage("", nil, "cm-"+name)), "e2e/"+ns+"/"+name+":v1")
		return suite.registry.Host + "/e2e/" + ns + "/" + name + ":v1"
	}
	a := dependsOn(newPackage(ns, "a", image("a"), ""), "b")
	b := dependsOn(newPackage(ns, "b", image("b"), ""), "c")
	c := dependsOn(newPackage(ns, "c", image("c"), ""), "a")
	createPackage(t, a)
	createPackage(t, b)
	createPackage(t, c)
	cond := waitForReadyMessage(t, a, metav1.ConditionFalse, v1alpha1.DependencyCycleReason,
		"dependency cycle: Package "+ns+"/a → Package "+ns+"/b → Package "+ns+"/c → Package "+ns+"/a")
	assert.True(t, apimeta.IsStatusConditionTrue(a.Status.Conditions, meta.StalledCondition), "a cycle stalls: %s", cond.Message)
	for _, name := range []string{"a", "b", "c"} {
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "cm-"+name))
	}

	// Break the cycle at c: c applies, then b, then a, each woken by the one it depends on.
	updateObject(t, c, func() { c.Spec.DependsOn = nil })
	for _, p := range []*v1alpha1.Package{c, b, a} {
		waitForReady(t, p, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	}
}

// TestDependsOnTeardownOrder: when a dependent and its dependency are both deleted, the
// dependency waits (Deleting, naming the dependent) until the dependent is gone, so its objects
// stay while the dependent's teardown runs. The dependent's object carries a finalizer of the
// test's, which holds its teardown for as long as the test likes.
func TestDependsOnTeardownOrder(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	baseImage := suite.registry.Host + "/e2e/" + ns + "/base:v1"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "base-cm")), "e2e/"+ns+"/base:v1")
	heldImage := suite.registry.Host + "/e2e/" + ns + "/held:v1"
	pushPackage(t, writePackage(t, heldPackage), "e2e/"+ns+"/held:v1")

	base := newPackage(ns, "base", baseImage, "")
	app := dependsOn(newPackage(ns, "app", heldImage, ""), "base")
	createPackage(t, base)
	createPackage(t, app)
	waitForReady(t, app, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	release := func() {
		// Also a cleanup, after the test's context has ended.
		require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Patch(context.WithoutCancel(t.Context()), held,
			client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))))
	}
	t.Cleanup(release)

	// The dependent goes first and is held by its object's finalizer.
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), app))
	waitForReadyMessage(t, app, metav1.ConditionFalse, v1alpha1.DeletingReason, "waiting for 1 object(s) to go")
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), base))
	cond := waitForReadyMessage(t, base, metav1.ConditionFalse, v1alpha1.DeletingReason, "waiting for Package "+ns+"/app")
	assert.True(t, strings.Contains(cond.Message, "depend on this one"), cond.Message)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "base-cm"), "the dependency tore down while its dependent was still being torn down")

	// Released, the dependent goes, which wakes the dependency, which goes.
	release()
	eventually(t, func(a *attempt) {
		assert.False(a, exists(a, suite.mgmtClient, "v1", "ConfigMap", ns, "base-cm"))
		assert.False(a, exists(a, suite.mgmtClient, "v1", "ConfigMap", ns, "held"))
	}, "both torn down")
}

// TestDependsOnNotDeletedDependent: a dependency being deleted does not wait for a dependent
// that is not being deleted (it would wait forever); the dependent then waits for it again.
func TestDependsOnNotDeletedDependent(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/cms:v1"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "cm-x")), "e2e/"+ns+"/cms:v1")
	other := suite.registry.Host + "/e2e/" + ns + "/other:v1"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "cm-y")), "e2e/"+ns+"/other:v1")
	base := newPackage(ns, "base", image, "")
	app := dependsOn(newPackage(ns, "app", other, ""), "base")
	createPackage(t, base)
	createPackage(t, app)
	waitForReady(t, app, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	deleteAndWait(t, base)
	waitForReadyMessage(t, app, metav1.ConditionFalse, v1alpha1.DependencyNotReadyReason, "Package "+ns+"/base does not exist")
}

// TestDependsOnClusterPackage: a Package waits for a ClusterPackage it names and is woken when
// the ClusterPackage becomes Ready (1h intervals: only the watch explains it); the API server
// refuses a ClusterPackage that depends on a Package.
func TestDependsOnClusterPackage(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	appImage := suite.registry.Host + "/e2e/" + ns + "/app:v1"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "app-cm")), "e2e/"+ns+"/app:v1")
	platformImage := suite.registry.Host + "/e2e/" + ns + "/platform:v1"
	pushPackage(t, writePackage(t, configMapsPackage(ns, nil, "platform-cm")), "e2e/"+ns+"/platform:v1")
	cpName := ns + "-platform"

	app := newPackage(ns, "app", appImage, "")
	app.Spec.DependsOn = []v1alpha1.Dependency{{Kind: v1alpha1.ClusterPackageKind, Name: cpName}}
	createPackage(t, app)
	waitForReadyMessage(t, app, metav1.ConditionFalse, v1alpha1.DependencyNotReadyReason, "ClusterPackage "+cpName+" does not exist")

	cp := &v1alpha1.ClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: cpName},
		Spec: v1alpha1.PackageSpec{Image: platformImage, Interval: &metav1.Duration{Duration: time.Hour}}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), cp))
	cleanupObject(t, cp)
	waitForReady(t, cp, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	waitForReady(t, app, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	bad := &v1alpha1.ClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: ns + "-bad"},
		Spec: v1alpha1.PackageSpec{Image: platformImage, DependsOn: []v1alpha1.Dependency{{Kind: v1alpha1.PackageKind, Name: "app"}}}}
	err := suite.mgmtClient.Create(t.Context(), bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a ClusterPackage may depend on ClusterPackages only")
}

// TestDependsOnTerminatingDependentWakesNoDependency: a tenant's Package that depends on a
// ClusterPackage is deleted and held in deletion by a finalizer of the tenant's own, then edited
// again and again. Its changes woke the ClusterPackage, a whole apply pass of the platform's
// package for each, though the ClusterPackage was not being deleted and so waited for nothing.
// Only a dependency being deleted is woken by its dependents' deletion.
func TestDependsOnTerminatingDependentWakesNoDependency(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	appImage := suite.registry.Host + "/e2e/" + ns + "/app:v1"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "app-cm")), "e2e/"+ns+"/app:v1")
	platformImage := suite.registry.Host + "/e2e/" + ns + "/platform:v1"
	pushPackage(t, writePackage(t, configMapsPackage(ns, nil, "platform-cm")), "e2e/"+ns+"/platform:v1")
	// A label value names it: at most 63 bytes.
	cp := &v1alpha1.ClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "e2e-depwake-" + ns[len(ns)-8:]},
		Spec: v1alpha1.PackageSpec{Image: platformImage, Interval: &metav1.Duration{Duration: time.Hour}}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), cp))
	cleanupObject(t, cp)
	waitForReady(t, cp, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	const hold = "e2e.pkgsync.dev/hold"
	app := newPackage(ns, "app", appImage, "")
	app.Finalizers = []string{hold}
	app.Spec.DependsOn = []v1alpha1.Dependency{{Kind: v1alpha1.ClusterPackageKind, Name: cp.Name}}
	createPackage(t, app)
	t.Cleanup(func() {
		_ = suite.mgmtClient.Patch(context.Background(), &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	waitForReady(t, app, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	require.NoError(t, suite.mgmtClient.Delete(t.Context(), app))
	eventually(t, func(a *attempt) {
		got := &v1alpha1.Package{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), clientKey(app), got)) {
			assert.Equal(a, []string{hold}, got.Finalizers, "pkgsync's teardown done, the tenant's finalizer left")
		}
	})

	// settle asks for a reconcile of the ClusterPackage and returns its count of reconciles once
	// that one is recorded: the reconciles before it are counted too.
	settle := func() uint64 {
		before, _ := reconcileDurations(t, v1alpha1.ClusterPackageKind, cp)
		requestReconcile(t, cp)
		token := cp.GetAnnotations()[meta.ReconcileRequestAnnotation]
		var n uint64
		eventually(t, func(a *attempt) {
			got := &v1alpha1.ClusterPackage{}
			if assert.NoError(a, suite.mgmtClient.Get(a.Context(), clientKey(cp), got)) {
				assert.Equal(a, token, got.Status.LastHandledReconcileAt)
			}
			n, _ = reconcileDurations(a, v1alpha1.ClusterPackageKind, cp)
			assert.GreaterOrEqual(a, n, before+1)
		})
		return n
	}
	first := settle()
	for i := range 3 {
		require.NoError(t, suite.mgmtClient.Patch(t.Context(), &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}},
			client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"interval":"%dh"}}`, i+2)))))
	}
	assert.Equal(t, first+1, settle(), "a terminating dependent's edits woke the ClusterPackage it depends on")
}

// TestReadyExprAttackIsRefused (issue 41, hole 1): a tenant's readyExpr matches a 64 KiB
// annotation of its own Package against itself, a regular expression Go cannot interrupt and
// that ran minutes an evaluation. It is refused before it runs (InvalidDependency, naming sizes
// only), and another tenant's Package converges meanwhile.
func TestReadyExprAttackIsRefused(t *testing.T) {
	t.Parallel()
	attackerNS, otherNS := newNamespace(t), newNamespace(t)
	image := func(ns, name string) string {
		pushPackage(t, writePackage(t, configMapsPackage("", nil, "cm-"+name)), "e2e/"+ns+"/"+name+":v1")
		return suite.registry.Host + "/e2e/" + ns + "/" + name + ":v1"
	}
	createPackage(t, newPackage(attackerNS, "dep", image(attackerNS, "dep"), ""))
	attacker := newPackage(attackerNS, "attacker", image(attackerNS, "attacker"), "")
	attacker.Annotations = map[string]string{"pkgsync.dev/hold": strings.Repeat("x?", 32<<10) + "y"}
	attacker.Spec.DependsOn = []v1alpha1.Dependency{{Name: "dep",
		ReadyExpr: "self.metadata.annotations['pkgsync.dev/hold'].matches(self.metadata.annotations['pkgsync.dev/hold'])"}}
	createPackage(t, attacker)
	other := newPackage(otherNS, "other", image(otherNS, "other"), "")
	createPackage(t, other)

	cond := waitForReadyMessage(t, attacker, metav1.ConditionFalse, v1alpha1.InvalidDependencyReason, "regular expression over the size limits")
	assert.NotContains(t, cond.Message, "x?x?", "the message names sizes, not the annotation")
	waitForReady(t, other, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", attackerNS, "cm-attacker"), "nothing of the attacker's package is applied")
}
