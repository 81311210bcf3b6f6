package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	containerregistryv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestPackageOperatorPackageInHCPNamespace installs a component of a multi-component Package
// Operator package (testdata/pko-shop) into a hosted-control-plane namespace of a labelled
// HostedCluster: CEL conditions, a locked image, constraints, a hosted-cluster phase and
// templates reading the HostedCluster, unchanged.
func TestPackageOperatorPackageInHCPNamespace(t *testing.T) {
	t.Parallel()
	hc, hcp := newHostedCluster(t, true)
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(hc), hc))
	hc.SetLabels(map[string]string{"example.com/team": "payments"})
	hc.SetAnnotations(map[string]string{"example.com/owner": "alice"})
	require.NoError(t, unstructured.SetNestedStringMap(hc.Object, map[string]string{"node-role.kubernetes.io/infra": ""}, "spec", "nodeSelector"))
	require.NoError(t, suite.mgmtClient.Update(t.Context(), hc))

	pushPackage(t, "testdata/pko-shop", "e2e/pko-shop:v1")
	image := suite.registry.Host + "/e2e/pko-shop:v1"
	pkg := newPackage(hcp, "shop", image, "")
	pkg.Spec.Component = "addon"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))

	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.True(t, exists(t, suite.hostedClient, "v1", "Namespace", "", "shop-payments"), "the hosted phase, named from the HostedCluster's label")
	data := configMapData(t, hcp, "shop-addon")
	assert.Equal(t, map[string]string{
		"image":         "quay.io/example/shop-api@sha256:3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d",
		"hostedCluster": hc.GetNamespace() + "/guest",
		"hcpNamespace":  hcp,
		"owner":         "alice",
		"nodeSelector":  `{"node-role.kubernetes.io/infra":""}`,
	}, data)
	addon := &unstructured.Unstructured{}
	addon.SetAPIVersion("v1")
	addon.SetKind("ConfigMap")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: hcp, Name: "shop-addon"}, addon))
	assert.NotContains(t, addon.GetAnnotations(), "package-operator.run/condition", "the condition annotation is not applied")
	for _, l := range []string{"package-operator.run/package", "package-operator.run/instance"} {
		assert.NotContains(t, addon.GetLabels(), l, "Package Operator's labels are not added")
	}
	assert.Equal(t, "shop", addon.GetLabels()[ownerLabel], "pkgsync's ownership labels are")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-debug"), "its condition is false")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-metrics"), "left out by the path filter")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-root"), "the root component is not installed")

	// uniqueInScope: a second installation of the package in the namespace applies nothing.
	second := newPackage(hcp, "shop-again", image, `{"monitoring": true}`)
	second.Spec.Component = "addon"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), second))
	cond := waitForReady(t, second, metav1.ConditionFalse, v1alpha1.UniqueInScopeConstraintViolatedReason)
	assert.Contains(t, cond.Message, "Package "+hcp+"/shop already installs")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-metrics"), "nothing of the second installation is applied")

	// platformVersion: a component needing a Kubernetes release that does not exist.
	future := newPackage(hcp, "future", image, "")
	future.Spec.Component = "future"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), future))
	cond = waitForReady(t, future, metav1.ConditionFalse, v1alpha1.PlatformVersionConstraintViolatedReason)
	assert.Contains(t, cond.Message, "spec.constraints[0].platformVersion not met: the package needs Kubernetes >=99")
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-future"))

	for _, p := range []*v1alpha1.Package{future, second, pkg} {
		require.NoError(t, suite.mgmtClient.Delete(t.Context(), p))
	}
	eventually(t, func(a *attempt) {
		for _, p := range []*v1alpha1.Package{future, second, pkg} {
			err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(p), &v1alpha1.Package{})
			assert.True(a, apierrors.IsNotFound(err), "Package %s still there: %v", p.Name, err)
		}
		finalizeNamespace(a, suite.hosted.Config, "shop-payments")
	})
	assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", hcp, "shop-addon"))
}

// pushPackageOperatorImage pushes dir as Package Operator's builder (kubectl package build)
// lays a package out: a Docker schema2 image for linux/amd64, its config a Docker image
// config, one tar layer holding the package's files under package/, made canonical.
func pushPackageOperatorImage(t *testing.T, dir, repoTag string) string {
	t.Helper()
	files := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		files["package/"+filepath.ToSlash(rel)] = data
		return err
	}))
	img, err := mutate.ConfigFile(empty.Image, &containerregistryv1.ConfigFile{
		Architecture: "amd64", OS: "linux", RootFS: containerregistryv1.RootFS{Type: "layers"},
	})
	require.NoError(t, err)
	layer, err := crane.Layer(files)
	require.NoError(t, err)
	img, err = mutate.AppendLayers(img, layer)
	require.NoError(t, err)
	img, err = mutate.Canonical(img)
	require.NoError(t, err)
	mt, err := img.MediaType()
	require.NoError(t, err)
	require.Equal(t, types.DockerManifestSchema2, mt, "the format Package Operator images have")

	ref := suite.registry.Host + "/" + repoTag
	require.NoError(t, crane.Push(img, ref, crane.Insecure, crane.WithContext(t.Context())))
	dgst, err := img.Digest()
	require.NoError(t, err)
	return dgst.String()
}

// pkoShopImage is a multi-component Package Operator package as its authors write it: a lock
// file as kubectl package update writes it (metadata included), and two components that each
// map the same destination condition (only one is installed per Package).
var pkoShopImage = map[string]string{
	"manifest.yaml": `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: shop}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
  components: {}
`,
	"components/backend/manifest.yaml": `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: backend}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
  images:
  - name: api
    image: quay.io/example/shop-api:v2
test:
  template:
  - name: defaults
    context:
      package: {metadata: {name: shop, namespace: shop}}
`,
	"components/backend/manifest.lock.yaml": `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifestLock
metadata:
  creationTimestamp: null
spec:
  images:
  - digest: sha256:5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e
    image: quay.io/example/shop-api:v2
    name: api
`,
	"components/backend/deploy.yaml.gotmpl": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .package.metadata.name }}-backend
  labels: {app.kubernetes.io/name: shop-backend}
  annotations:
    package-operator.run/phase: deploy
    package-operator.run/condition-map: Available => shop.example.com/Available
spec:
  selector:
    matchLabels: {app: backend}
  template:
    metadata:
      labels: {app: backend}
    spec:
      containers:
      - name: api
        image: {{ .images.api }}
`,
	"components/backend/.test-fixtures/defaults/deploy.yaml": "not read by the controller",
	"components/frontend/manifest.yaml": `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: frontend}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
`,
	"components/frontend/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop-frontend
  annotations:
    package-operator.run/phase: deploy
    package-operator.run/condition-map: Available => shop.example.com/Available
spec:
  selector:
    matchLabels: {app: frontend}
  template:
    metadata:
      labels: {app: frontend}
    spec:
      containers:
      - name: ui
        image: registry.k8s.io/pause:3.10
`,
}

// TestPackageOperatorBuiltImage runs an image laid out exactly as Package Operator's builder
// lays it out through the controller: both components of a multi-component package, each
// mapping the same destination, with the component's lock file as Package Operator writes it.
func TestPackageOperatorBuiltImage(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repoTag := "e2e/" + ns + "/pko-built:v1"
	pushPackageOperatorImage(t, writePackage(t, pkoShopImage), repoTag)
	image := suite.registry.Host + "/" + repoTag

	for _, component := range []string{"backend", "frontend"} {
		pkg := newPackage(ns, "shop-"+component, image, "")
		pkg.Spec.Component = component
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
		t.Cleanup(func() { _ = suite.mgmtClient.Delete(t.Context(), pkg) })
		name := "shop-" + component + "-backend"
		if component == "frontend" {
			name = "shop-frontend"
		}
		eventually(t, func(a *attempt) {
			assert.True(a, exists(a, suite.mgmtClient, "apps/v1", "Deployment", ns, name), "Deployment %s not applied yet", name)
		})
		markDeploymentAvailable(t, suite.mgmtClient, ns, name)
		waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			c := apimeta.FindStatusCondition(pkg.Status.Conditions, "shop.example.com/Available")
			if assert.NotNil(a, c, "no mapped condition in %v", pkg.Status.Conditions) {
				assert.Equal(a, metav1.ConditionTrue, c.Status)
			}
		})
	}

	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "shop-backend-backend"}, d))
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.Len(t, containers, 1)
	assert.Equal(t, "quay.io/example/shop-api@sha256:5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e",
		containers[0].(map[string]any)["image"], "the digest of the lock file Package Operator wrote")
	assert.NotContains(t, d.GetAnnotations(), "package-operator.run/condition-map", "the annotation is not applied")
}
