package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/config"
	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/test/testenv"
)

// Timeouts of the install tests' eventual checks.
const (
	installEventually = 30 * time.Second
	installTick       = 100 * time.Millisecond
)

// writeCounter counts the requests that would change the cluster: every request but reads and
// server-side dry runs.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = nil
}

func (w *writeCounter) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

// countingKubeconfig puts a proxy that counts writes in front of the control plane and returns
// a kubeconfig that goes through it.
func countingKubeconfig(t *testing.T, cfg *rest.Config) (string, *writeCounter) {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	counter := &writeCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if r.URL.Query().Get("dryRun") == "" {
				counter.mu.Lock()
				counter.writes = append(counter.writes, r.Method+" "+r.URL.Path)
				counter.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "proxy.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path, counter
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

var pkgsyncCRDs = []string{"packages.pkgsync.dev", "clusterpackages.pkgsync.dev", "objectdeployments.pkgsync.dev", "clusterobjectdeployments.pkgsync.dev", "hostedclusterpackages.pkgsync.dev", "trustpolicies.pkgsync.dev"}

func getCRD(ctx context.Context, c client.Client, name string) (*unstructured.Unstructured, error) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
	return crd, err
}

func deploymentImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == config.ContainerName {
			return c.Image
		}
	}
	return ""
}

// markAvailable plays kube-controller-manager, which envtest does not run: the Deployment
// reports its current generation rolled out and available.
func markAvailable(ctx context.Context, c client.Client, d *appsv1.Deployment) error {
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
	}
	return c.Status().Update(ctx, d)
}

// TestInstallUninstall installs pkgsync on a real API server, installs again, waits for the
// controller, and uninstalls with and without pkgsync resources present.
func TestInstallUninstall(t *testing.T) {
	t.Parallel()
	cp := testenv.NewControlPlane(t, "install")
	c, err := client.New(cp.Config, client.Options{})
	require.NoError(t, err)
	kubeconfig, writes := countingKubeconfig(t, cp.Config)
	ns := config.DefaultNamespace
	deployKey := client.ObjectKey{Namespace: ns, Name: config.DeploymentName}
	image := "registry.example.com/platform/pkgsync:v1"

	t.Run("a server-side dry run writes nothing", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "install", "--kubeconfig", kubeconfig, "--image", image, "--dry-run=server")
		require.NoError(t, err, stderr)
		assert.Empty(t, writes.list())
		assert.Contains(t, stdout, "CustomResourceDefinition.apiextensions.k8s.io packages.pkgsync.dev created (dry run)")
		assert.Contains(t, stdout, "Namespace "+ns+" created (dry run)")
		assert.Contains(t, stdout, "Deployment.apps "+ns+"/"+config.DeploymentName+" created (dry run; not checked by the API server: namespace "+ns+" does not exist yet)")
		assert.Contains(t, stderr, "nothing was changed")
		_, err = getCRD(t.Context(), c, "packages.pkgsync.dev")
		assert.True(t, apierrors.IsNotFound(err), "no CRD: %v", err)

		stdout, stderr, err = runCLI(t, "install", "--kubeconfig", kubeconfig, "--image", image, "--dry-run=server", "-o", "json")
		require.NoError(t, err, stderr)
		assert.Empty(t, writes.list())
		var report installReport
		require.NoError(t, json.Unmarshal([]byte(stdout), &report), stdout)
		assert.Equal(t, installReport{Version: version.Version, Image: image, Namespace: ns, DryRun: "server"}, installReport{
			Version: report.Version, Image: report.Image, Namespace: report.Namespace, DryRun: report.DryRun})
		require.Len(t, report.Objects, 14)
		assert.Equal(t, objectResult{Object: "CustomResourceDefinition.apiextensions.k8s.io packages.pkgsync.dev", Action: "created"}, report.Objects[0],
			"in the order applied: the CRDs first")
		assert.Contains(t, report.Objects, objectResult{Object: "Namespace " + ns, Action: "created"})
		assert.Equal(t, objectResult{Object: "Deployment.apps " + ns + "/" + config.DeploymentName, Action: "created",
			Note: "not checked by the API server: namespace " + ns + " does not exist yet"}, report.Objects[13])
		assert.Contains(t, stderr, "nothing was changed", "progress stays on stderr")
	})

	t.Run("install applies the CRDs, RBAC and the Deployment", func(t *testing.T) {
		writes.reset()
		stdout, stderr, err := runCLI(t, "install", "--kubeconfig", kubeconfig, "--image", image, "--wait=false")
		require.NoError(t, err, stderr)
		assert.NotEmpty(t, writes.list())
		for _, name := range pkgsyncCRDs {
			crd, err := getCRD(t.Context(), c, name)
			require.NoError(t, err)
			established, _ := condition(crd, "Established")
			assert.True(t, established, "%s is Established when install returns", name)
			assert.Contains(t, stdout, "CustomResourceDefinition.apiextensions.k8s.io "+name+" created")
		}
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{}))
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "pkgsync-controller"}, &corev1.ServiceAccount{}))
		for _, name := range []string{"pkgsync-manager", "pkgsync-connector-secrets"} {
			require.NoError(t, c.Get(t.Context(), client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}))
		}
		for _, name := range []string{"pkgsync-manager", "pkgsync-connector-secrets", "pkgsync-apply"} {
			var crb rbacv1.ClusterRoleBinding
			require.NoError(t, c.Get(t.Context(), client.ObjectKey{Name: name}, &crb))
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "pkgsync-controller", Namespace: ns}}, crb.Subjects)
		}
		var deploy appsv1.Deployment
		require.NoError(t, c.Get(t.Context(), deployKey, &deploy))
		assert.Equal(t, image, deploymentImage(&deploy))
		managers := map[string]bool{}
		for _, mf := range deploy.ManagedFields {
			managers[mf.Manager] = true
		}
		assert.Equal(t, map[string]bool{installFieldManager: true}, managers)
		assert.Contains(t, stderr, "pkgsync installed: 14 created, 0 configured, 0 unchanged")
	})

	t.Run("a second install writes nothing", func(t *testing.T) {
		var before appsv1.Deployment
		require.NoError(t, c.Get(t.Context(), deployKey, &before))
		writes.reset()
		stdout, stderr, err := runCLI(t, "install", "--kubeconfig", kubeconfig, "--image", image, "--wait=false")
		require.NoError(t, err, stderr)
		assert.Empty(t, writes.list(), "no write request")
		assert.Equal(t, 14, strings.Count(stdout, " unchanged\n"), stdout)
		var after appsv1.Deployment
		require.NoError(t, c.Get(t.Context(), deployKey, &after))
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion)
	})

	t.Run("-o yaml prints install's result once, as a document", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "install", "--kubeconfig", kubeconfig, "--image", image, "--wait=false", "-o", "yaml")
		require.NoError(t, err, stderr)
		var report installReport
		require.NoError(t, yaml.UnmarshalStrict([]byte(stdout), &report), stdout)
		assert.Empty(t, report.DryRun)
		require.Len(t, report.Objects, 14)
		for _, o := range report.Objects {
			assert.Equal(t, "unchanged", o.Action, o.Object)
		}
		assert.Contains(t, stderr, "pkgsync installed: 0 created, 0 configured, 14 unchanged")
	})

	t.Run("install waits until the Deployment is Available", func(t *testing.T) {
		newImage := "registry.example.com/platform/pkgsync:v2"
		done := make(chan error, 1)
		var stderr string
		go func() {
			var err error
			_, stderr, err = runCLI(t, "install", "--kubeconfig", kubeconfig, "--image", newImage, "--timeout", "1m")
			done <- err
		}()
		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			var d appsv1.Deployment
			if !assert.NoError(ct, c.Get(t.Context(), deployKey, &d)) {
				return
			}
			if !assert.Equal(ct, newImage, deploymentImage(&d)) {
				return
			}
			assert.NoError(ct, markAvailable(t.Context(), c, &d))
		}, installEventually, installTick)
		select {
		case err := <-done:
			require.NoError(t, err)
			assert.Contains(t, stderr, "waiting for Deployment.apps "+ns+"/"+config.DeploymentName+" to be Available")
		case <-time.After(installEventually):
			t.Fatal("install did not return once the Deployment was Available")
		}
	})

	t.Run("install reports a Deployment that does not become Available", func(t *testing.T) {
		_, _, err := runCLI(t, "install", "--kubeconfig", kubeconfig, "--image", "registry.example.com/platform/pkgsync:v3", "--timeout", "2s")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Deployment.apps "+ns+"/"+config.DeploymentName+" is not Available after 2s")
		assert.Contains(t, err.Error(), "kubectl -n "+ns+" describe deployment "+config.DeploymentName)
	})

	pkg := &unstructured.Unstructured{}
	pkg.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Package"))
	pkg.SetNamespace("clusters-demo")
	pkg.SetName("hosted-addon")

	t.Run("uninstall refuses while a Package exists", func(t *testing.T) {
		require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters-demo"}}))
		pkg.SetFinalizers([]string{v1alpha1.FinalizerName})
		require.NoError(t, unstructured.SetNestedField(pkg.Object, "registry.example.com/addons/hosted-addon:v1", "spec", "image"))
		require.NoError(t, c.Create(t.Context(), pkg))
		// What the controller would have recorded: one object on each side, one phase as
		// earlier versions recorded it (a string per object), the other as groups.
		require.NoError(t, unstructured.SetNestedField(pkg.Object, map[string]any{"phases": []any{
			map[string]any{"name": "hosted-rbac", "class": v1alpha1.ClassHostedCluster, "objects": []any{"/v1/Namespace//hosted-addon"}},
			map[string]any{"name": "deploy", "groups": []any{map[string]any{
				"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "clusters-demo", "names": []any{"hosted-addon-operator"},
			}}},
		}}, "status", "inventory"))
		require.NoError(t, c.Status().Update(t.Context(), pkg))
		// A TrustPolicy applies nothing: it does not hold the uninstall, and goes with its CRD.
		policy := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"repositories": []any{"registry.example.com/addons"},
			"verify":       map[string]any{"secretRef": map[string]any{"name": "platform-keys"}},
		}}}
		policy.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.TrustPolicyKind))
		policy.SetName("platform")
		require.NoError(t, c.Create(t.Context(), policy))

		writes.reset()
		_, _, err := runCLI(t, "uninstall", "--kubeconfig", kubeconfig)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "1 pkgsync resources still exist")
		assert.NotContains(t, err.Error(), "TrustPolicy")
		assert.Contains(t, err.Error(), "Package.pkgsync.dev clusters-demo/hosted-addon")
		assert.Contains(t, err.Error(), "--force")
		assert.Empty(t, writes.list(), "nothing deleted")
	})

	t.Run("uninstall --force removes everything and names the objects that stay", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "uninstall", "--kubeconfig", kubeconfig, "--force", "--wait=false", "-o", "json")
		require.NoError(t, err, stderr)
		var report uninstallReport
		require.NoError(t, json.Unmarshal([]byte(stdout), &report), stdout)
		assert.Equal(t, []releasedResource{{Object: "Package.pkgsync.dev clusters-demo/hosted-addon", Stay: []appliedObject{
			{Cluster: "hosted cluster", Object: "Namespace hosted-addon", Phase: "hosted-rbac"},
			{Cluster: "management cluster", Object: "Deployment.apps clusters-demo/hosted-addon-operator", Phase: "deploy"},
		}}}, report.Released)
		require.NotEmpty(t, report.Objects)
		assert.Equal(t, objectResult{Object: "Deployment.apps " + ns + "/" + config.DeploymentName, Action: "deleted"}, report.Objects[0],
			"the controller first")
		assert.True(t, apierrors.IsNotFound(c.Get(t.Context(), deployKey, &appsv1.Deployment{})))
		assert.True(t, apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKey{Name: "pkgsync-apply"}, &rbacv1.ClusterRoleBinding{})))
		// The CRDs go once the API server has deleted their resources, the Package among them.
		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			for _, name := range pkgsyncCRDs {
				_, err := getCRD(t.Context(), c, name)
				assert.True(ct, apierrors.IsNotFound(err), "%s: %v", name, err)
			}
		}, installEventually, installTick)
		// envtest runs no namespace controller: the namespace stays Terminating.
		var nsObj corev1.Namespace
		if err := c.Get(t.Context(), client.ObjectKey{Name: ns}, &nsObj); err == nil {
			assert.NotNil(t, nsObj.DeletionTimestamp)
		}
	})

	t.Run("uninstall of an uninstalled pkgsync finds nothing", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "uninstall", "--kubeconfig", kubeconfig, "--wait=false")
		require.NoError(t, err, stderr)
		assert.Contains(t, stdout, "CustomResourceDefinition.apiextensions.k8s.io packages.pkgsync.dev not found")

		stdout, stderr, err = runCLI(t, "uninstall", "--kubeconfig", kubeconfig, "--wait=false", "-o", "yaml")
		require.NoError(t, err, stderr)
		var report uninstallReport
		require.NoError(t, yaml.UnmarshalStrict([]byte(stdout), &report), stdout)
		assert.Equal(t, ns, report.Namespace)
		assert.Empty(t, report.Released)
		assert.Contains(t, report.Objects, objectResult{Object: "CustomResourceDefinition.apiextensions.k8s.io packages.pkgsync.dev", Action: "not found"})
	})
}

// TestInstallExport checks the manifests install prints, without a cluster.
func TestInstallExport(t *testing.T) {
	t.Parallel()
	pinned := "registry.example.com/platform/pkgsync:v1@sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name      string
		args      []string
		namespace string
		image     string
		// lockdown tells whether the controller gets config/lockdown's flag.
		lockdown bool
	}{
		{"defaults", nil, config.DefaultNamespace, version.Image(), false},
		{"image pinned by digest", []string{"--image", pinned}, config.DefaultNamespace, pinned, false},
		{"another namespace", []string{"--namespace", "platform"}, "platform", version.Image(), false},
		{"locked down", []string{"--lockdown", "--namespace", "platform"}, "platform", version.Image(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, _, err := runCLI(t, append([]string{"install", "--export"}, tt.args...)...)
			require.NoError(t, err)
			objs := decodeYAMLStream(t, stdout)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			assert.Equal(t, []string{"Namespace", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition",
				"CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding",
				"ClusterRoleBinding", "Deployment"}, kinds, "what others need comes first, as kubectl apply -f reads the file")
			assert.Equal(t, tt.namespace, objs[0].GetName())
			deploy := objs[len(objs)-1]
			assert.Equal(t, tt.namespace, deploy.GetNamespace())
			containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
			assert.Equal(t, tt.image, containers[0].(map[string]any)["image"])
			assert.Equal(t, tt.lockdown, slices.Contains(containers[0].(map[string]any)["args"].([]any), any("--default-service-account=pkgsync")))
		})
	}
}

func TestInstallFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an image without registry", []string{"--export", "--image", "pkgsync"}, "--image"},
		{"a bad namespace", []string{"--export", "--namespace", "Platform_1"}, "Platform_1"},
		{"an unknown dry-run mode", []string{"--dry-run=maybe"}, `must be "none", "client" or "server"`},
		{"export and dry run", []string{"--export", "--dry-run=client"}, "exclude each other"},
		{"export and a result document", []string{"--export", "-o", "json"}, "--export and -o json exclude each other"},
		{"a format install does not print", []string{"--dry-run=client", "-o", "wide"}, `--output must be text, json or yaml, not "wide"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := runCLI(t, append([]string{"install"}, tt.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			var code exitCodeError
			require.ErrorAs(t, err, &code)
			assert.Equal(t, 2, code.code, "a usage error")
		})
	}

	t.Run("a client dry run contacts no cluster", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := runCLI(t, "install", "--dry-run=client", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
		require.NoError(t, err)
		assert.Contains(t, stdout, "Deployment.apps "+config.DefaultNamespace+"/"+config.DeploymentName+" (dry run)")
		assert.Contains(t, stderr, "nothing was sent to a cluster")
	})

	t.Run("a client dry run's result as a document", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := runCLI(t, "install", "--dry-run=client", "-o", "yaml", "--image", "registry.example.com/pkgsync:v1")
		require.NoError(t, err)
		var report installReport
		require.NoError(t, yaml.UnmarshalStrict([]byte(stdout), &report), stdout)
		assert.Equal(t, "client", report.DryRun)
		assert.Equal(t, "registry.example.com/pkgsync:v1", report.Image)
		assert.Equal(t, config.DefaultNamespace, report.Namespace)
		require.Len(t, report.Objects, 14)
		assert.Equal(t, objectResult{Object: "Deployment.apps " + config.DefaultNamespace + "/" + config.DeploymentName}, report.Objects[13],
			"no action: a client dry run asks no API server")
		assert.Contains(t, stderr, "nothing was sent to a cluster", "progress stays on stderr")
	})
}

// The text uninstall prints of a released resource: the objects that stay, a line each.
func TestReleasedText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		inventory any
		want      string
	}{
		{nil, "Package.pkgsync.dev clusters-demo/hosted-addon released; it had applied nothing\n"},
		{map[string]any{"phases": []any{
			map[string]any{"name": "hosted-rbac", "class": v1alpha1.ClassHostedCluster, "objects": []any{"/v1/Namespace//hosted-addon"}},
			map[string]any{"name": "deploy", "groups": []any{map[string]any{
				"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "clusters-demo", "names": []any{"hosted-addon-operator"},
			}}},
		}}, "Package.pkgsync.dev clusters-demo/hosted-addon released; these objects it applied stay:\n" +
			"  hosted cluster: Namespace hosted-addon (phase hosted-rbac)\n" +
			"  management cluster: Deployment.apps clusters-demo/hosted-addon-operator (phase deploy)\n"},
		{map[string]any{"phases": "not a list"},
			"Package.pkgsync.dev clusters-demo/hosted-addon released; these objects it applied stay:\n  (status.inventory does not parse: "},
	}
	for _, tt := range tests {
		pkg := &unstructured.Unstructured{}
		pkg.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Package"))
		pkg.SetNamespace("clusters-demo")
		pkg.SetName("hosted-addon")
		if tt.inventory != nil {
			require.NoError(t, unstructured.SetNestedField(pkg.Object, tt.inventory, "status", "inventory"))
		}
		left, err := inventoryOf(pkg)
		r := releasedResource{Object: apply.RefOf(pkg).String(), Stay: left}
		if err != nil {
			r.Problem = "status.inventory does not parse: " + err.Error()
		}
		var out strings.Builder
		(&installer{stdout: &out}).recordReleased(r)
		assert.True(t, strings.HasPrefix(out.String(), tt.want), "got %q\nwant %q", out.String(), tt.want)
	}
}

// decodeYAMLStream splits a multi-document YAML stream into objects.
func decodeYAMLStream(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(stream, "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		m := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &m))
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}
