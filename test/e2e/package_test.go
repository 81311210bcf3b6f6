package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// appPackage is a management-only package with a configuration schema: a ConfigMap rendered
// from the config and a Deployment.
var appPackage = map[string]string{
	"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: app
spec:
  phases:
  - name: config
  - name: deploy
  config:
    openAPIV3Schema:
      type: object
      properties:
        message:
          type: string
          default: hello
        replicas:
          type: integer
          minimum: 1
          default: 1
`,
	"config.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  annotations:
    pkgsync.dev/phase: config
data:
  message: {{ .config.message | quote }}
`,
	"extra.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-extra
  annotations:
    pkgsync.dev/phase: config
data:
  version: "1"
`,
	"deploy.yaml.gotmpl": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  annotations:
    pkgsync.dev/phase: deploy
spec:
  replicas: {{ .config.replicas }}
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`,
}

// updateSpec writes spec into the Package, read afresh, again when the controller wrote the
// Package (its status) between the read and the write.
func updateSpec(t *testing.T, pkg *v1alpha1.Package, spec v1alpha1.PackageSpec) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), pkg); err != nil {
			return err
		}
		pkg.Spec = *spec.DeepCopy()
		return suite.mgmtClient.Update(t.Context(), pkg)
	}))
}

func newPackage(ns, name, image string, config string) *v1alpha1.Package {
	p := &v1alpha1.Package{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.PackageSpec{Image: image, Interval: &metav1.Duration{Duration: time.Hour}},
	}
	if config != "" {
		p.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(config)}
	}
	return p
}

func configMapData(t testingT, ns, name string) map[string]string {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &cm))
	return cm.Data
}

// waitForHandledRequest requests a reconcile and waits until the controller reports it handled.
func waitForHandledRequest(t *testing.T, pkg *v1alpha1.Package) {
	t.Helper()
	requestReconcile(t, pkg)
	token := pkg.Annotations[meta.ReconcileRequestAnnotation]
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, token, pkg.Status.LastHandledReconcileAt)
	}, "reconcile request %s handled", token)
}

// requestReconcile sets Flux's reconcile-now annotation on a resource of the suite's
// management cluster.
func requestReconcile(t *testing.T, obj client.Object) {
	t.Helper()
	requestReconcileOn(t, suite.mgmtClient, obj)
}

// requestReconcileOn asks the controller to reconcile obj on the cluster of c now, as `flux
// reconcile` does.
func requestReconcileOn(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj))
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	obj.SetAnnotations(annotations)
	require.NoError(t, c.Patch(t.Context(), obj, patch))
}

func TestPackageLifecycle(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	image := suite.registry.Host + "/e2e/" + ns + "/app:stable"
	digest1 := pushPackage(t, writePackage(t, appPackage), "e2e/"+ns+"/app:stable")

	pkg := newPackage(ns, "app", image, `{"message":"from the Package"}`)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))

	// Phase deploy waits for the Deployment: nothing sets its status but us.
	eventually(t, func(a *attempt) {
		cond := readyCondition(a, pkg)
		if assert.NotNil(a, cond) {
			assert.Equal(a, v1alpha1.PhaseProgressingReason, cond.Reason)
		}
		assert.Equal(a, "deploy", pkg.Status.Phase)
	})
	assert.Equal(t, "from the Package", configMapData(t, ns, "app-config")["message"])
	markDeploymentAvailable(t, suite.mgmtClient, ns, "app")
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	// The patch helper writes conditions before the rest of the status.
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, digest1, pkg.Status.LastAppliedRevision)
		assert.Equal(a, pkg.Generation, pkg.Status.ObservedGeneration)
	})
	require.NotNil(t, pkg.Status.Inventory)
	assert.Len(t, pkg.Status.History, 1)

	t.Run("events tell the rollout", func(t *testing.T) {
		eventually(t, func(a *attempt) {
			var events corev1.EventList
			require.NoError(a, suite.mgmtClient.List(a.Context(), &events, client.InNamespace(ns)))
			messages := map[string]string{}
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == v1alpha1.PackageKind && e.InvolvedObject.Name == "app" {
					messages[e.Reason] = e.Message
				}
			}
			assert.Contains(a, messages[v1alpha1.PhaseProgressingReason], "phase deploy")
			assert.Contains(a, messages[v1alpha1.ReconciliationSucceededReason], digest1)
		})
	})

	t.Run("kubectl wait sees Ready", func(t *testing.T) {
		out, err := exec.CommandContext(t.Context(), "kubectl", "--kubeconfig", suite.mgmt.KubeconfigPath,
			"wait", "--for=condition=Ready", "--timeout=30s", "-n", ns, "package/app").CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Contains(t, string(out), "condition met")
	})

	t.Run("a new image on the same tag is picked up on request, and pruned", func(t *testing.T) {
		v2 := map[string]string{}
		for k, v := range appPackage {
			v2[k] = v
		}
		delete(v2, "extra.yaml")
		digest2 := pushPackage(t, writePackage(t, v2), "e2e/"+ns+"/app:stable")
		require.NotEqual(t, digest1, digest2)
		requestReconcile(t, pkg)
		eventually(t, func(a *attempt) {
			readyCondition(a, pkg)
			assert.Equal(a, digest2, pkg.Status.LastAppliedRevision)
		})
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-extra"), "object that left the package is pruned")
		assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-config"))
		assert.Len(t, pkg.Status.History, 2)
	})

	t.Run("a config change re-renders", func(t *testing.T) {
		updateObject(t, pkg, func() { pkg.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"message":"changed"}`)} })
		eventually(t, func(a *attempt) {
			assert.Equal(a, "changed", configMapData(a, ns, "app-config")["message"])
		})
		waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	})

	t.Run("failures keep the last good revision running", func(t *testing.T) {
		cases := []struct {
			name   string
			mutate func(*v1alpha1.Package)
			reason string
		}{
			{"missing tag", func(p *v1alpha1.Package) { p.Spec.Image = suite.registry.Host + "/e2e/" + ns + "/app:no-such-tag" }, v1alpha1.PullFailedReason},
			{"invalid config", func(p *v1alpha1.Package) { p.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":0}`)} }, v1alpha1.InvalidConfigReason},
			{"broken package", func(p *v1alpha1.Package) {
				broken := map[string]string{}
				for k, v := range appPackage {
					broken[k] = v
				}
				broken["extra.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    pkgsync.dev/phase: no-such-phase\n"
				pushPackage(t, writePackage(t, broken), "e2e/"+ns+"/app:broken")
				p.Spec.Image = suite.registry.Host + "/e2e/" + ns + "/app:broken"
			}, v1alpha1.RenderFailedReason},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), pkg))
				good := pkg.Spec.DeepCopy()
				tc.mutate(pkg) // once: it may push an image
				mutated := pkg.Spec.DeepCopy()
				updateSpec(t, pkg, *mutated)
				cond := waitForReady(t, pkg, metav1.ConditionFalse, tc.reason)
				assert.NotEmpty(t, cond.Message)
				assert.True(t, exists(t, suite.mgmtClient, "apps/v1", "Deployment", ns, "app"), "previous revision's objects stay")
				assert.True(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-config"))

				updateSpec(t, pkg, *good)
				waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
			})
		}
	})

	t.Run("suspend stops writes, resume corrects drift", func(t *testing.T) {
		updateObject(t, pkg, func() { pkg.Spec.Suspend = true })
		waitForHandledRequest(t, pkg) // the controller has seen the suspended spec
		require.NoError(t, suite.mgmtClient.Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"}}))

		// A suspended Package still acknowledges a reconcile request, without applying anything:
		// once this one is handled, the deleted object would be back if anything had been applied.
		waitForHandledRequest(t, pkg)
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-config"), "a suspended Package restores nothing")

		updateObject(t, pkg, func() { pkg.Spec.Suspend = false })
		eventually(t, func(a *attempt) {
			assert.True(a, exists(a, suite.mgmtClient, "v1", "ConfigMap", ns, "app-config"), "ConfigMap app-config restored")
		})
	})

	t.Run("delete tears down", func(t *testing.T) {
		require.NoError(t, suite.mgmtClient.Delete(t.Context(), pkg))
		eventually(t, func(a *attempt) {
			err := suite.mgmtClient.Get(a.Context(), client.ObjectKeyFromObject(pkg), pkg)
			assert.True(a, apierrors.IsNotFound(err), "Package still there: %v", err)
		})
		assert.False(t, exists(t, suite.mgmtClient, "apps/v1", "Deployment", ns, "app"))
		assert.False(t, exists(t, suite.mgmtClient, "v1", "ConfigMap", ns, "app-config"))
	})
}

// TestNewImagePickedUpOnInterval needs no request: the tag is re-resolved every interval.
func TestNewImagePickedUpOnInterval(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	files := map[string]string{}
	for k, v := range appPackage {
		if k != "deploy.yaml.gotmpl" {
			files[k] = v
		}
	}
	files["manifest.yaml"] = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: app\nspec:\n  phases:\n  - name: config\n  config:\n    openAPIV3Schema:\n      type: object\n      properties:\n        message: {type: string, default: hello}\n"
	pushPackage(t, writePackage(t, files), "e2e/"+ns+"/app:latest")
	pkg := newPackage(ns, "app", suite.registry.Host+"/e2e/"+ns+"/app:latest", "")
	pkg.Spec.Interval = &metav1.Duration{Duration: time.Second}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	files["extra.yaml"] = strings.Replace(files["extra.yaml"], `version: "1"`, `version: "2"`, 1)
	digest2 := pushPackage(t, writePackage(t, files), "e2e/"+ns+"/app:latest")
	eventually(t, func(a *attempt) {
		readyCondition(a, pkg)
		assert.Equal(a, digest2, pkg.Status.LastAppliedRevision)
		assert.Equal(a, "2", configMapData(a, ns, "app-extra")["version"])
	})
}
