package controller

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/test/testenv"
)

// largeInventory is the inventory of a package of n objects in namespace, spread over three
// phases the way an add-on's are: RBAC and CRDs first, the operator, then n ConfigMaps (their
// names as long as an operator's usually are).
func largeInventory(namespace string, n int) apply.Inventory {
	setup := apply.InventoryPhase{Name: "setup", Objects: []apply.ObjectRef{
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "configurations.addons.example.com"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "addon-operator"},
		{Version: "v1", Kind: "ServiceAccount", Namespace: namespace, Name: "addon-operator"},
	}}
	deploy := apply.InventoryPhase{Name: "deploy", Objects: []apply.ObjectRef{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: namespace, Name: "addon-operator"},
	}}
	config := apply.InventoryPhase{Name: "configure", Class: v1alpha1.ClassHostedCluster}
	for i := range n - len(setup.Objects) - len(deploy.Objects) {
		config.Objects = append(config.Objects, apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: namespace,
			Name: fmt.Sprintf("addon-operator-managed-configuration-%05d", i)})
	}
	return apply.Inventory{Phases: []apply.InventoryPhase{setup, deploy, config}}
}

// TestInventoryOnAPIServer records inventories the way a pass does (the report's record hook,
// before the first write) on a real API server and reads them back as the next pass does.
func TestInventoryOnAPIServer(t *testing.T) {
	t.Parallel()
	cp := testenv.NewControlPlane(t, "inventory")
	_, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}})
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	const ns = "clusters-production-hosted-0001"
	require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	newPackage := func(t *testing.T, name string) *v1alpha1.Package {
		t.Helper()
		pkg := &v1alpha1.Package{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{v1alpha1.FinalizerName}},
			Spec:       v1alpha1.PackageSpec{Image: "registry.example.com/addons/addon:v1"},
		}
		require.NoError(t, c.Create(t.Context(), pkg))
		return pkg
	}
	readBack := func(t *testing.T, pkg *v1alpha1.Package) (*v1alpha1.Package, apply.Inventory) {
		t.Helper()
		var got v1alpha1.Package
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got))
		inv, err := inventoryFromStatus(got.Status.Inventory)
		require.NoError(t, err)
		return &got, inv
	}

	// The Package as the API server stores and serves it stays far below the 1.5 MiB limit of
	// an object with a 5000-object inventory.
	t.Run("a package of 5000 objects", func(t *testing.T) {
		const objects, limit = 5000, 1 << 20
		pkg := newPackage(t, "large")
		inv := largeInventory(ns, objects)
		rep := beginReport(c, pkg, applyCommon(&pkg.Status.ApplyStatus), runtimectrl.Metrics{}, nil)
		require.NoError(t, rep.recordInventory(&pkg.Status.ApplyStatus)(t.Context(), inv))

		raw := getRaw(t, cp.Config, "/apis/pkgsync.dev/v1alpha1/namespaces/"+ns+"/packages/large")
		t.Logf("a Package with an inventory of %d objects is %d bytes as served", objects, len(raw))
		assert.Less(t, len(raw), limit, "the Package with an inventory of %d objects", objects)
		_, back := readBack(t, pkg)
		assert.Equal(t, inv, back)
	})

	// A Package whose status an earlier version wrote (one string per object) is read as it
	// was, and the next record writes groups in its place.
	t.Run("an inventory of an earlier version", func(t *testing.T) {
		pkg := newPackage(t, "upgraded")
		inv := largeInventory(ns, 6)
		var ids []string
		for _, ph := range inv.Phases {
			var phIDs []string
			for _, r := range ph.Objects {
				phIDs = append(phIDs, strings.Join([]string{r.Group, r.Version, r.Kind, r.Namespace, r.Name}, "/"))
			}
			pkg.Status.Inventory = appendPhase(pkg.Status.Inventory, v1alpha1.InventoryPhase{Name: ph.Name, Class: ph.Class, Objects: phIDs})
			ids = append(ids, phIDs...)
		}
		require.NoError(t, c.Status().Update(t.Context(), pkg))
		got, back := readBack(t, pkg)
		assert.Equal(t, inv, back)
		assert.Len(t, ids, 6)

		inv.Phases[2].Objects = append(inv.Phases[2].Objects, apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "new"})
		rep := beginReport(c, got, applyCommon(&got.Status.ApplyStatus), runtimectrl.Metrics{}, nil)
		require.NoError(t, rep.recordInventory(&got.Status.ApplyStatus)(t.Context(), inv))
		got, back = readBack(t, pkg)
		assert.Equal(t, inv, back)
		for _, ph := range got.Status.Inventory.Phases {
			assert.Empty(t, ph.Objects, "phase %s is written as groups", ph.Name)
			assert.NotEmpty(t, ph.Groups, "phase %s", ph.Name)
		}
	})
}

func appendPhase(inv *v1alpha1.Inventory, ph v1alpha1.InventoryPhase) *v1alpha1.Inventory {
	if inv == nil {
		inv = &v1alpha1.Inventory{}
	}
	inv.Phases = append(inv.Phases, ph)
	return inv
}

// getRaw reads path from the API server as JSON, as stored and served.
func getRaw(t *testing.T, cfg *rest.Config, path string) []byte {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	require.NoError(t, err)
	raw, err := rc.Get().AbsPath(path).SetHeader("Accept", "application/json").DoRaw(t.Context())
	require.NoError(t, err)
	return raw
}
