package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// requestsUnder counts the requests source sent for repositories under prefix (REPO/...).
func (c *registryCounter) requestsUnder(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key, count := range c.counts {
		if _, path, _ := strings.Cut(key, " "); strings.HasPrefix(path, "/v2/"+prefix+"/") {
			n += count
		}
	}
	return n
}

// mirrorSet creates a cluster-scoped ImageDigestMirrorSet or ImageTagMirrorSet, deleted when
// the test ends.
func mirrorSet(t *testing.T, kind, field, name, src, mirror string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{field: []any{map[string]any{
			"source": src, "mirrors": []any{mirror}, "mirrorSourcePolicy": "NeverContactSource",
		}}},
	}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), obj))
	t.Cleanup(func() { _ = suite.mgmtClient.Delete(t.Context(), obj) })
}

// TestPackageFromMirror: with the source registry stopped and OpenShift mirror sets naming a
// mirror that holds the same content (pushed with the project's own push), Packages named by
// tag and by digest, and a fleet, converge from the mirror: the digest unchanged, the mirror
// named in status and in the Ready message, and nothing sent to the source (NeverContactSource).
func TestPackageFromMirror(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{})
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{})
	dir := writePackage(t, appPackage)
	digest := pushPackageTo(t, dir, src.Host+"/e2e-mirror-src/app:v1")
	require.Equal(t, digest, pushPackageTo(t, dir, mirror.Host+"/e2e-mirror-dst/app:v1"), "one build, one digest")
	fleetDir := writePackage(t, fleetPackage("1", false))
	fleetDigest := pushPackageTo(t, fleetDir, src.Host+"/e2e-mirror-src/fleet:v1")
	require.Equal(t, fleetDigest, pushPackageTo(t, fleetDir, mirror.Host+"/e2e-mirror-dst/fleet:v1"))
	require.NoError(t, src.Stop())

	name := strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	mirrorSet(t, "ImageDigestMirrorSet", "imageDigestMirrors", name, src.Host+"/e2e-mirror-src", mirror.Host+"/e2e-mirror-dst")
	mirrorSet(t, "ImageTagMirrorSet", "imageTagMirrors", name, src.Host+"/e2e-mirror-src", mirror.Host+"/e2e-mirror-dst")
	tagged, err := source.ParseReference(src.Host + "/e2e-mirror-src/app:v1")
	require.NoError(t, err)
	pinned := tagged
	pinned.Tag, pinned.Digest = "", digest
	// The controller shares suite.source: once it reads through the mirrors, so do the reconciles.
	eventually(t, func(a *attempt) {
		for _, ref := range []source.Reference{tagged, pinned} {
			locs := suite.source.Locations(ref)
			if assert.Len(a, locs, 1, ref.String()) {
				assert.Equal(a, mirror.Host+"/e2e-mirror-dst/app", locs[0].Name())
			}
		}
	})
	before := suite.registryRequests.requestsUnder("e2e-mirror-src")

	// One namespace each: both install the same objects.
	byTag := newPackage(newNamespace(t), "by-tag", tagged.String(), "")
	byDigest := newPackage(newNamespace(t), "by-digest", pinned.String(), "")
	for _, p := range []*v1alpha1.Package{byTag, byDigest} {
		require.NoError(t, suite.mgmtClient.Create(t.Context(), p))
	}
	for _, p := range []*v1alpha1.Package{byTag, byDigest} {
		markDeploymentAvailable(t, suite.mgmtClient, p.Namespace, "app")
	}
	for _, p := range []*v1alpha1.Package{byTag, byDigest} {
		waitForReadyMessage(t, p, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "from "+mirror.Host+"/e2e-mirror-dst/app")
		require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(p), p))
		assert.Equal(t, digest, p.Status.LastAppliedRevision)
		assert.Equal(t, mirror.Host+"/e2e-mirror-dst/app", p.Status.LastAppliedFrom)
	}

	// A fleet resolves its tag through the tag mirror; its members pull from the mirror.
	hcNamespace := newNamespace(t)
	newFleetClusters(t, hcNamespace, hcNamespace, "a", "b")
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "mirror-" + hcNamespace[len(hcNamespace)-8:]},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": hcNamespace}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: src.Host + "/e2e-mirror-src/fleet:v1"}},
		},
	}
	newFleet(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, fleetDigest)
	members := fleetMembers(t, t.Context(), fleet.Name)
	require.Len(t, members, 2)
	for _, m := range members {
		assert.Equal(t, fleetDigest, m.Status.LastAppliedRevision)
		assert.Equal(t, mirror.Host+"/e2e-mirror-dst/fleet", m.Status.LastAppliedFrom)
	}
	// The fleet's own status names the mirror that served its target.
	eventually(t, func(a *attempt) {
		got := &v1alpha1.HostedClusterPackage{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), clientKey(fleet), got)) && assert.NotNil(a, got.Status.Target) {
			assert.Equal(a, fleetDigest, got.Status.Target.Digest)
			assert.Equal(a, []string{mirror.Host + "/e2e-mirror-dst/fleet"}, got.Status.TargetAppliedFrom)
		}
	})
	assert.Equal(t, before, suite.registryRequests.requestsUnder("e2e-mirror-src"), "the source was contacted")
	assert.Positive(t, suite.registryRequests.count(http.MethodGet, "/v2/e2e-mirror-dst/app/manifests/"+digest))
}

// TestControllerImageOverrides: with --registry-host-overrides and --image-prefix-overrides, the
// controller relocates the .images a package's templates see (the package image itself is read
// through the source client's overrides, which the source tests cover).
func TestControllerImageOverrides(t *testing.T) {
	t.Parallel()
	runShardController(t, "image-overrides", func(o *reconciler.Options) {
		o.ImageOverrides = source.Overrides{
			Hosts:    map[string]string{"quay.io": "mirror.example.com:5000"},
			Prefixes: []source.PrefixOverride{{From: "registry.example.com/team/", To: "mirror.example.com:5000/team-mirror/"}},
		}
	})
	dir := writePackage(t, map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata: {name: images}
spec:
  phases: [{name: deploy}]
  images:
  - {name: app, image: "quay.io/team/app:v1"}
  - {name: sidecar, image: "registry.example.com/team/sidecar:v2"}
  - {name: other, image: "other.example.com/x/y:v3"}
`,
		"cm.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: images
  annotations: {pkgsync.dev/phase: deploy}
data:
  app: {{ .images.app | quote }}
  sidecar: {{ .images.sidecar | quote }}
  other: {{ .images.other | quote }}
`,
	})
	pushPackage(t, dir, "e2e-image-overrides:v1")
	ns := newNamespace(t)
	p := newPackage(ns, "images", suite.registry.Host+"/e2e-image-overrides:v1", "")
	p.Labels = map[string]string{shardLabel: "image-overrides"}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), p))
	waitForReady(t, p, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, map[string]string{
		"app":     "mirror.example.com:5000/team/app:v1",
		"sidecar": "mirror.example.com:5000/team-mirror/sidecar:v2",
		"other":   "other.example.com/x/y:v3",
	}, configMapData(t, ns, "images"))
}

// plainPackage is a package of one ConfigMap holding version, for any namespace.
func plainPackage(version string) map[string]string {
	return map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: plain}\nspec:\n  phases: [{name: config}]\n",
		"cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  annotations: {pkgsync.dev/phase: config}\ndata: {version: \"" + version + "\"}\n",
	}
}

// TestWildcardMirrorSet: an ImageDigestMirrorSet with a wildcard source (*.domain) serves a
// Package whose registry host is below the domain, the whole host replaced by the mirror; the
// source host does not even resolve, and is never asked (NeverContactSource).
func TestWildcardMirrorSet(t *testing.T) {
	t.Parallel()
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{})
	dir := writePackage(t, plainPackage("wild"))
	digest := pushPackageTo(t, dir, mirror.Host+"/e2e-wild-dst/app:v1")
	name := strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	mirrorSet(t, "ImageDigestMirrorSet", "imageDigestMirrors", name, "*.e2e-wild.invalid", mirror.Host+"/e2e-wild-dst")
	pinned, err := source.ParseReference("pkgs.e2e-wild.invalid/app@" + digest)
	require.NoError(t, err)
	eventually(t, func(a *attempt) {
		locs := suite.source.Locations(pinned)
		if assert.Len(a, locs, 1) {
			assert.Equal(a, mirror.Host+"/e2e-wild-dst/app", locs[0].Name())
		}
	})

	p := newPackage(newNamespace(t), "wild", pinned.String(), "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), p))
	waitForReadyMessage(t, p, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "from "+mirror.Host+"/e2e-wild-dst/app")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(p), p))
	assert.Equal(t, digest, p.Status.LastAppliedRevision)
	assert.Equal(t, mirror.Host+"/e2e-wild-dst/app", p.Status.LastAppliedFrom)
}

// mirroredHostedCluster creates a HostedCluster in namespace with spec.imageContentSources
// (none when ics is nil), Available, and its hosted-control-plane namespace; it returns the
// HostedCluster and that namespace.
func mirroredHostedCluster(t *testing.T, namespace, name string, ics []any) (*unstructured.Unstructured, string) {
	t.Helper()
	hc := testenv.HostedCluster(namespace, name)
	hc.SetLabels(map[string]string{"rollout-wave": name})
	if ics != nil {
		require.NoError(t, unstructured.SetNestedSlice(hc.Object, ics, "spec", "imageContentSources"))
	}
	hcp := hosted.ControlPlaneNamespace(namespace, name)
	createNamespace(t, suite.mgmtClient, hcp, nil)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), hc))
	setHostedClusterAvailable(t, hc, true)
	return hc, hcp
}

// TestHostedClusterMirrors: a Package in a hosted-control-plane namespace reads by digest
// through its own HostedCluster's spec.imageContentSources, and names the mirror in status; a
// change of the field reconciles it at once. The attack: tenant A's HostedCluster names a
// mirror (one A runs) for a source tenant B's Package reads too; B's reads never go there,
// before or after A's Package has pulled (and rendered) the same digest through it.
func TestHostedClusterMirrors(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{})
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{})
	dir := writePackage(t, fleetPackage("hcm", false))
	digest := pushPackageTo(t, dir, src.Host+"/e2e-hcm-src/app:v1")
	require.Equal(t, digest, pushPackageTo(t, dir, mirror.Host+"/e2e-hcm-a/app:v1"))
	image := src.Host + "/e2e-hcm-src/app@" + digest

	ns := newNamespace(t)
	hcA, nsA := mirroredHostedCluster(t, ns, "tenant-a", []any{map[string]any{"source": src.Host + "/e2e-hcm-src", "mirrors": []any{mirror.Host + "/e2e-hcm-a"}}})
	_, nsB := mirroredHostedCluster(t, ns, "tenant-b", nil)
	_, nsC := mirroredHostedCluster(t, ns, "tenant-c", nil)

	// Tenant B first: nothing of it reaches A's mirror (the pushes above were counted too).
	pushed := suite.registryRequests.requestsUnder("e2e-hcm-a")
	pkgB := newPackage(nsB, "app", image, "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkgB))
	waitForReady(t, pkgB, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, pushed, suite.registryRequests.requestsUnder("e2e-hcm-a"), "tenant B's pull reached tenant A's mirror")

	// Tenant A reads through its own mirror.
	pkgA := newPackage(nsA, "app", image, "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkgA))
	waitForReadyMessage(t, pkgA, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "from "+mirror.Host+"/e2e-hcm-a/app")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(pkgA), pkgA))
	assert.Equal(t, digest, pkgA.Status.LastAppliedRevision)
	assert.Equal(t, mirror.Host+"/e2e-hcm-a/app", pkgA.Status.LastAppliedFrom)
	assert.Greater(t, suite.registryRequests.requestsUnder("e2e-hcm-a"), pushed)

	// Tenant B again, after A's pull and render of the same digest: still the source's.
	pkgC := newPackage(nsC, "app", image, "")
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkgC))
	for _, p := range []*v1alpha1.Package{pkgB, pkgC} {
		cond := waitForReady(t, p, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		assert.NotContains(t, cond.Message, mirror.Host)
		require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(p), p))
		assert.Empty(t, p.Status.LastAppliedFrom, p.Namespace)
	}

	// A's HostedCluster drops the mirror: A reads from the source, without waiting for its
	// interval (an hour).
	require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(hcA), hcA))
	unstructured.RemoveNestedField(hcA.Object, "spec", "imageContentSources")
	require.NoError(t, suite.mgmtClient.Update(t.Context(), hcA))
	eventually(t, func(a *attempt) {
		got := &v1alpha1.Package{}
		if assert.NoError(a, suite.mgmtClient.Get(a.Context(), clientKey(pkgA), got)) {
			assert.Empty(a, got.Status.LastAppliedFrom)
			assert.Equal(a, digest, got.Status.LastAppliedRevision)
		}
	})
}

// TestControllerPullOverrides: the controller reads a Package whose image names a registry it
// cannot reach through --registry-host-overrides or --image-prefix-overrides, and its status
// names the registry that served it.
func TestControllerPullOverrides(t *testing.T) {
	t.Parallel()
	dir := writePackage(t, plainPackage("override"))
	digest := pushPackageTo(t, dir, suite.registry.Host+"/e2e-override-host/app:v1")
	require.Equal(t, digest, pushPackageTo(t, dir, suite.registry.Host+"/e2e-override-prefix/app:v1"))
	overrides := source.Overrides{
		Hosts:    map[string]string{"unreachable.e2e-override.invalid": suite.registry.Host},
		Prefixes: []source.PrefixOverride{{From: "other.e2e-override.invalid/org/", To: suite.registry.Host + "/e2e-override-prefix/"}},
	}
	src, err := source.NewClient(source.Options{Transport: suite.registryRequests, Overrides: overrides})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startControllerWith(ctx, shardLabel+"=pull-overrides", src, func(o *reconciler.Options) { o.ImageOverrides = overrides })
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); <-stopped })

	for image, from := range map[string]string{
		"unreachable.e2e-override.invalid/e2e-override-host/app:v1": suite.registry.Host + "/e2e-override-host/app",
		"other.e2e-override.invalid/org/app:v1":                     suite.registry.Host + "/e2e-override-prefix/app",
	} {
		p := newPackage(newNamespace(t), "app", image, "")
		p.Labels = map[string]string{shardLabel: "pull-overrides"}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), p))
		waitForReadyMessage(t, p, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, "from "+from)
		require.NoError(t, suite.mgmtClient.Get(t.Context(), clientKey(p), p))
		assert.Equal(t, digest, p.Status.LastAppliedRevision, image)
		assert.Equal(t, "v1", p.Status.LastAppliedTag, image)
		assert.Equal(t, from, p.Status.LastAppliedFrom, image)
	}
}
