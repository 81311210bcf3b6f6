package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// configMapsPackage is a one-phase package of ConfigMaps with the given names, in namespace
// (empty: the Package's own), whose manifest lists scopes (none: any).
func configMapsPackage(namespace string, scopes []string, names ...string) map[string]string {
	manifest := "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: cms\nspec:\n  phases:\n  - name: config\n"
	if len(scopes) > 0 {
		manifest += "  scopes: [" + strings.Join(scopes, ", ") + "]\n"
	}
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name)
		if namespace != "" {
			fmt.Fprintf(&b, "  namespace: %s\n", namespace)
		}
		fmt.Fprintf(&b, "  annotations:\n    pkgsync.dev/phase: config\ndata:\n  name: %s\n", name)
	}
	return map[string]string{"manifest.yaml": manifest, "objects.yaml": b.String()}
}

// createPackage creates pkg and deletes it (waiting until it is gone) when the test ends.
func createPackage(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, suite.mgmtClient.Create(t.Context(), obj))
	cleanupObject(t, obj)
}

// inventoryIDs lists the objects of an inventory as group/version/kind/namespace/name.
func inventoryIDs(inv *v1alpha1.Inventory) []string {
	var ids []string
	if inv == nil {
		return nil
	}
	for _, ph := range inv.Phases {
		ids = append(ids, ph.Objects...)
		for _, g := range ph.Groups {
			for _, name := range g.Names {
				ids = append(ids, strings.Join([]string{g.Group, g.Version, g.Kind, g.Namespace, name}, "/"))
			}
		}
	}
	return ids
}

// TestPullSecretRef: a registry that requires authentication serves the package only to a
// Package whose spec.pullSecretRef names a dockerconfigjson Secret with its credentials.
func TestPullSecretRef(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{Htpasswd: true})
	dockerConfig := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host,
		base64.StdEncoding.EncodeToString([]byte(reg.Username+":"+reg.Password)))
	creds, err := source.CredentialsFromDockerConfigJSON([]byte(dockerConfig))
	require.NoError(t, err)
	ns := newNamespace(t)
	img, err := source.Build(writePackage(t, configMapsPackage("", nil, "private")), source.BuildOptions{})
	require.NoError(t, err)
	ref, err := source.ParseReference(reg.Host + "/e2e/" + ns + "/private:v1")
	require.NoError(t, err)
	_, err = suite.source.Push(t.Context(), img, []source.Reference{ref}, creds)
	require.NoError(t, err)

	pkg := newPackage(ns, "private", ref.String(), "")
	pkg.Spec.PullSecretRef = &meta.LocalObjectReference{Name: "registry"}
	createPackage(t, pkg)
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Contains(t, cond.Message, "read pull secret "+ns+"/registry", "a missing Secret is named")

	// A Secret of the wrong type: the controller says what it must be. Secrets are not watched:
	// the retry interval picks it up.
	opaque := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry"},
		Data:       map[string][]byte{"config.json": []byte(dockerConfig)},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), opaque))
	waitForReadyMessage(t, pkg, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason, "must be of type "+string(corev1.SecretTypeDockerConfigJson))
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "private"))

	// The right Secret, named by the Package: its credentials are used.
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry-creds"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfig)},
	}))
	updateObject(t, pkg, func() { pkg.Spec.PullSecretRef.Name = "registry-creds" })
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, "private", configMapData(t, ns, "private")["name"])
}

// TestPruneFalseReleasesObjects: with prune: false an object that leaves the package stays in
// the cluster, untracked, and survives the Package's deletion; tracked objects do not.
func TestPruneFalseReleasesObjects(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "e2e/" + ns + "/release:stable"
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "kept", "released")), repo)
	pkg := newPackage(ns, "release", suite.registry.Host+"/"+repo, "")
	pkg.Spec.Prune = new(bool)
	createPackage(t, pkg)
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	digest2 := pushPackage(t, writePackage(t, configMapsPackage("", nil, "kept")), repo)
	requestReconcile(t, pkg)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var got v1alpha1.Package
		if !assert.NoError(ct, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got)) {
			return
		}
		assert.Equal(ct, digest2, got.Status.LastAppliedRevision)
		assert.Equal(ct, []string{"/v1/ConfigMap/" + ns + "/kept"}, inventoryIDs(got.Status.Inventory), "the released object is no longer tracked")
	}, timeout, interval)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "released"), "prune: false leaves the object in the cluster")

	require.NoError(t, suite.mgmtClient.Delete(t.Context(), pkg))
	eventually(t, func(a *attempt) {
		assert.False(a, exists(a, suite.mgmtClient, "v1", "ConfigMap", ns, "kept"), "tracked objects are torn down")
	})
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "released"), "a released object is not torn down with the Package")
}

// TestManifestScopes: a package whose manifest lists spec.scopes is refused, as RenderFailed and
// Stalled, by the kind it does not name, and nothing of it is applied (docs/api.md).
func TestManifestScopes(t *testing.T) {
	t.Parallel()
	t.Run("Cluster-only package as a Package", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		pushPackage(t, writePackage(t, configMapsPackage("", []string{"Cluster"}, "cluster-only")), "e2e/"+ns+"/cluster-only:v1")
		pkg := newPackage(ns, "cluster-only", suite.registry.Host+"/e2e/"+ns+"/cluster-only:v1", "")
		createPackage(t, pkg)
		cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.RenderFailedReason)
		assert.Contains(t, cond.Message, "does not support the Namespaced scope")
		stalled := apimeta.FindStatusCondition(pkg.Status.Conditions, meta.StalledCondition)
		if assert.NotNil(t, stalled, "a scope error is Stalled") {
			assert.Equal(t, v1alpha1.RenderFailedReason, stalled.Reason)
		}
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "cluster-only"), "nothing is applied")
	})
	t.Run("Namespaced-only package as a ClusterPackage", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t)
		pushPackage(t, writePackage(t, configMapsPackage(ns, []string{"Namespaced"}, "namespaced-only")), "e2e/"+ns+"/namespaced-only:v1")
		cp := &v1alpha1.ClusterPackage{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + ns},
			Spec:       v1alpha1.PackageSpec{Image: suite.registry.Host + "/e2e/" + ns + "/namespaced-only:v1", Interval: &metav1.Duration{Duration: time.Hour}},
		}
		createPackage(t, cp)
		cond := waitForReady(t, cp, metav1.ConditionFalse, v1alpha1.RenderFailedReason)
		assert.Contains(t, cond.Message, "does not support the Cluster scope")
		assert.NotNil(t, apimeta.FindStatusCondition(cp.Status.Conditions, meta.StalledCondition), "a scope error is Stalled")
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "namespaced-only"), "nothing is applied")

		// The same image is fine for the kind it names.
		pkg := newPackage(ns, "namespaced-only", cp.Spec.Image, "")
		createPackage(t, pkg)
		waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "namespaced-only"))
	})
}

// TestTimeoutBoundsReconcile: spec.timeout bounds one reconciliation. A registry that accepts
// connections and never answers holds a reconcile only that long; it ends PullFailed with the
// deadline in the message, long before the source's own one-minute bound.
func TestTimeoutBoundsReconcile(t *testing.T) {
	t.Parallel()
	hole := newBlackHole(t, refusedAddress(t))
	ns := newNamespace(t)
	pkg := newPackage(ns, "slow", hole.listener.Addr().String()+"/e2e/slow:v1", "")
	pkg.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	pkg.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	start := time.Now()
	createPackage(t, pkg)
	var cond *metav1.Condition
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var got v1alpha1.Package
		if !assert.NoError(ct, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got)) {
			return
		}
		cond = apimeta.FindStatusCondition(got.Status.Conditions, meta.ReadyCondition)
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, v1alpha1.PullFailedReason, cond.Reason, cond.Message)
		}
	}, 20*time.Second, interval, "a 2s timeout ends the reconcile within seconds")
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Contains(t, cond.Message, "context deadline exceeded")
	assert.Positive(t, hole.accepted.Load(), "the registry was contacted")
}

// TestRetryIntervalPerResource: spec.retryInterval replaces the controller's --retry-interval
// (500ms in this suite). Two Packages fail on a tag that does not exist yet; once it is pushed,
// the one with the controller's interval recovers by itself, the one with retryInterval: 1h
// does not until asked.
func TestRetryIntervalPerResource(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	slow := newPackage(ns, "slow", suite.registry.Host+"/e2e/"+ns+"/late-slow:v1", "")
	slow.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	fast := newPackage(ns, "fast", suite.registry.Host+"/e2e/"+ns+"/late-fast:v1", "")
	createPackage(t, slow)
	createPackage(t, fast)
	waitForReady(t, slow, metav1.ConditionFalse, v1alpha1.PullFailedReason)
	waitForReady(t, fast, metav1.ConditionFalse, v1alpha1.PullFailedReason)

	// Both tags appear, the slow one's first.
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "late-slow")), "e2e/"+ns+"/late-slow:v1")
	pushPackage(t, writePackage(t, configMapsPackage("", nil, "late-fast")), "e2e/"+ns+"/late-fast:v1")
	waitForReady(t, fast, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	// Six controller retry intervals after the fast one recovered, the slow one still waits.
	assert.Never(t, func() bool {
		var got v1alpha1.Package
		if err := suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(slow), &got); err != nil {
			return false
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, meta.ReadyCondition)
	}, 3*time.Second, interval, "a Package with retryInterval: 1h is retried after 500ms")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "late-slow"))

	requestReconcile(t, slow)
	waitForReady(t, slow, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "late-slow"))
}

// TestRenderCacheKey counts renders in a controller process of its own: a reconcile of the same
// digest, configuration and metadata is served from the render cache (no pull, no render), and
// a change of any input the templates read (the configuration, an annotation) renders again.
func TestRenderCacheKey(t *testing.T) {
	t.Parallel()
	proc := runController(t, "render-cache")
	ns := newNamespace(t)
	// appPackage, with a ConfigMap that shows one annotation of the Package.
	files := maps.Clone(appPackage)
	files["config.yaml.gotmpl"] += `  team: {{ index .package.metadata.annotations "example.com/team" | default "none" | quote }}` + "\n"
	pushPackage(t, writePackage(t, files), "e2e/"+ns+"/app:v1")
	pkg := newPackage(ns, "app", suite.registry.Host+"/e2e/"+ns+"/app:v1", `{"message":"one"}`)
	pkg.Labels = map[string]string{shardLabel: "render-cache"}
	createPackage(t, pkg)
	markDeploymentAvailable(t, suite.mgmtClient, ns, "app")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	rendered := map[string]string{"outcome": "rendered"}
	cached := map[string]string{"outcome": "cached"}
	assert.Equal(t, 1.0, currentMetric(t, proc, "pkgsync_pulls_total", rendered))

	t.Run("an identical reconcile neither pulls nor renders", func(t *testing.T) {
		for range 3 {
			waitForHandledRequest(t, pkg)
		}
		waitForMetric(t, proc, "pkgsync_pulls_total", cached, ">= 3", func(v float64) bool { return v >= 3 })
		assert.Equal(t, 1.0, currentMetric(t, proc, "pkgsync_pulls_total", rendered))
	})

	t.Run("a config change renders again", func(t *testing.T) {
		updateObject(t, pkg, func() { pkg.Spec.Config.Raw = []byte(`{"message":"two"}`) })
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			var cm corev1.ConfigMap
			if assert.NoError(ct, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "app-config"}, &cm)) {
				assert.Equal(ct, "two", cm.Data["message"])
			}
		}, timeout, interval)
		assert.Equal(t, 2.0, currentMetric(t, proc, "pkgsync_pulls_total", rendered))
	})

	t.Run("an annotation change renders again", func(t *testing.T) {
		updateObject(t, pkg, func() { pkg.Annotations = map[string]string{"example.com/team": "blue"} })
		waitForHandledRequest(t, pkg) // metadata changes alone do not trigger a reconcile
		assert.Equal(t, 3.0, currentMetric(t, proc, "pkgsync_pulls_total", rendered))
		assert.Equal(t, "blue", configMapData(t, ns, "app-config")["team"])
		waitForHandledRequest(t, pkg)
		assert.Equal(t, 3.0, currentMetric(t, proc, "pkgsync_pulls_total", rendered), "the new annotation is cached too")
	})
}

// sharedPackage is a templated package that reads only its configuration: every resource that
// installs it with one configuration gets the same objects.
var sharedPackage = map[string]string{
	"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: shared
spec:
  phases:
  - name: config
  config:
    openAPIV3Schema:
      type: object
      properties:
        message: {type: string, default: hello}
`,
	"config.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: shared-config
  annotations:
    pkgsync.dev/phase: config
data:
  message: {{ .config.message | quote }}
`,
}

// TestRenderSharedAcrossPackages: a fleet of Packages, each in its namespace, of one image and
// configuration, whose templates do not name the Package, costs one render, not one per
// Package, however many reconcile at once (the controller runs 16 workers here).
func TestRenderSharedAcrossPackages(t *testing.T) {
	t.Parallel()
	const packages = 50
	proc := runController(t, "render-share", "--concurrency", "16")
	repo := "e2e/" + strings.ToLower(t.Name()) + "/shared"
	pushPackage(t, writePackage(t, sharedPackage), repo+":v1")
	var pkgs []*v1alpha1.Package
	for range packages {
		pkg := newPackage(newNamespace(t), "shared", suite.registry.Host+"/"+repo+":v1", `{"message":"fleet"}`)
		pkg.Labels = map[string]string{shardLabel: "render-share"}
		pkgs = append(pkgs, pkg)
	}
	// Deleted together while the controller runs (registered after it: cleanups run last in,
	// first out), then waited for.
	t.Cleanup(func() {
		for _, pkg := range pkgs {
			assert.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(context.WithoutCancel(t.Context()), pkg)))
		}
		for _, pkg := range pkgs {
			deleteAndWait(t, pkg)
		}
	})
	for _, pkg := range pkgs {
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	}
	for _, pkg := range pkgs {
		waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		assert.Equal(t, "fleet", configMapData(t, pkg.Namespace, "shared-config")["message"])
	}
	var rendered, cached float64
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		m, err := proc.scrape(t.Context())
		if assert.NoError(ct, err) {
			rendered, _ = sum(m, "pkgsync_pulls_total", map[string]string{"outcome": "rendered"})
			cached, _ = sum(m, "pkgsync_pulls_total", map[string]string{"outcome": "cached"})
		}
	}, timeout, interval)
	assert.Equal(t, 1.0, rendered, "renders for %d Packages of one image and configuration", packages)
	assert.Equal(t, float64(packages-1), cached, "Packages served a render made for another")
	assert.Equal(t, 1.0, currentMetric(t, proc, "pkgsync_render_cache_entries", nil), "renders held")
}

// TestClusterPackageServiceAccount: a ClusterPackage's spec.serviceAccountName is a
// ServiceAccount of the controller's namespace (--namespace), impersonated for every write to
// the management cluster: without RBAC the apply is forbidden, with it the package applies.
func TestClusterPackageServiceAccount(t *testing.T) {
	t.Parallel()
	controllerNS := newNamespace(t)
	runController(t, "cluster-sa", "--namespace", controllerNS)
	target := newNamespace(t)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "deployer"}}))
	pushPackage(t, writePackage(t, configMapsPackage(target, []string{"Cluster"}, "impersonated")), "e2e/"+target+"/impersonated:v1")
	cp := &v1alpha1.ClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + target, Labels: map[string]string{shardLabel: "cluster-sa"}},
		Spec: v1alpha1.PackageSpec{Image: suite.registry.Host + "/e2e/" + target + "/impersonated:v1", Interval: &metav1.Duration{Duration: time.Hour},
			ServiceAccountName: "deployer"},
	}
	createPackage(t, cp)
	cond := waitForReady(t, cp, metav1.ConditionFalse, v1alpha1.ForbiddenReason)
	assert.Contains(t, cond.Message, "system:serviceaccount:"+controllerNS+":deployer")
	assert.Contains(t, cond.Message, "forbidden")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "impersonated"))

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "deployer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), role))
	require.NoError(t, suite.mgmtClient.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "deployer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: controllerNS}},
	}))
	// RBAC is not watched: the retry interval picks the grant up.
	waitForReady(t, cp, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", target, "impersonated"))
}

// TestPackageTimingBounds: spec.timeout is at most 10m and spec.retryInterval at least 1s, so
// that a tenant can neither hold a shared worker for as long as its registry stalls nor retry in
// a loop; the API server says so at once.
func TestPackageTimingBounds(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, tt := range []struct {
		name    string
		edit    func(*v1alpha1.PackageSpec)
		refused string
	}{
		{"timeout-over", func(s *v1alpha1.PackageSpec) { s.Timeout = &metav1.Duration{Duration: time.Hour} }, "spec.timeout is at most 10m"},
		{"retry-under", func(s *v1alpha1.PackageSpec) { s.RetryInterval = &metav1.Duration{Duration: time.Millisecond} }, "spec.retryInterval is at least 1s"},
		{"at-the-bounds", func(s *v1alpha1.PackageSpec) {
			s.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
			s.RetryInterval = &metav1.Duration{Duration: time.Second}
		}, ""},
	} {
		pkg := newPackage(ns, tt.name, suite.registry.Host+"/e2e/"+ns+"/timing:v1", "")
		pkg.Spec.Suspend = true
		tt.edit(&pkg.Spec)
		err := suite.mgmtClient.Create(t.Context(), pkg)
		if tt.refused == "" {
			assert.NoError(t, err, tt.name)
			continue
		}
		if assert.Error(t, err, tt.name) {
			assert.Contains(t, err.Error(), tt.refused, tt.name)
		}
	}
}
