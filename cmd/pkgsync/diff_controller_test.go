package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/test/testenv"
)

// diffControllerShard keeps the controller of TestDiffPackageAsTheController to its Package.
const diffControllerShard = "test.pkgsync.dev/diff"

// TestDiffPackageAsTheController: `pkgsync diff package` renders as the controller does. The
// controller (`pkgsync controller`, in this process) applies a Package whose configuration comes
// from spec.configFrom (a ConfigMap and a Secret) and whose templates read .environment, the
// Package's labels and its image; diff then finds nothing to change, and prints no value of
// the Secret.
func TestDiffPackageAsTheController(t *testing.T) {
	t.Parallel()
	mgmt := testenv.NewControlPlane(t, "diff-controller")
	_, err := envtest.InstallCRDs(mgmt.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}})
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c, err := client.New(mgmt.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ns := "team"
	require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	dir := t.TempDir()
	for name, body := range map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: envdiff
spec:
  scopes: [Namespaced]
  phases:
  - name: deploy
  config:
    openAPIV3Schema:
      type: object
      properties:
        greeting: {type: string, default: hello}
        password: {type: string, default: none}
`,
		"deploy/objects.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: envdiff
  annotations: {pkgsync.dev/phase: deploy}
data:
  greeting: {{ .config.greeting | quote }}
  kubernetes: {{ .environment.kubernetes.version | quote }}
  tier: {{ index .package.metadata.labels "tier" | quote }}
  image: {{ .package.image | quote }}
---
apiVersion: v1
kind: Secret
metadata:
  name: envdiff
  annotations: {pkgsync.dev/phase: deploy}
stringData:
  password: {{ .config.password | quote }}
`,
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	ref := reg.Host + "/" + testenv.Repository(t, "envdiff") + ":v1"
	dockerConfig := emptyDockerConfig(t)
	_, err = runPkgsync(t, "push", dir, ref, "--version", "1", "--registry-config", dockerConfig)
	require.NoError(t, err)

	require.NoError(t, c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "envdiff-config"},
		Data: map[string]string{"config.yaml": "greeting: bonjour\n"}}))
	require.NoError(t, c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "envdiff-secret"},
		Data: map[string][]byte{"config.yaml": []byte("password: s3cret-from-configfrom\n")}}))
	pkg := &v1alpha1.Package{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "envdiff", Labels: map[string]string{diffControllerShard: "yes", "tier": "gold"}},
		Spec: v1alpha1.PackageSpec{
			Image:      ref,
			ConfigFrom: []v1alpha1.ConfigSource{{Kind: "ConfigMap", Name: "envdiff-config"}, {Kind: "Secret", Name: "envdiff-secret"}},
			Config:     &apiextensionsv1.JSON{Raw: []byte(`{}`)},
		},
	}
	require.NoError(t, c.Create(t.Context(), pkg))

	// The controller, as a user runs it, for this Package alone.
	ctx, cancel := context.WithCancel(t.Context())
	var stopped sync.WaitGroup
	stopped.Add(1)
	go func() {
		defer stopped.Done()
		cmd := newRootCmd()
		cmd.SetArgs([]string{"controller", "--kubeconfig", mgmt.KubeconfigPath, "--plain-http-registry", reg.Host,
			"--watch-label-selector", diffControllerShard + "=yes", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--disable-hosted-clusters", "--retry-interval", "1s", "--progress-interval", "200ms"})
		cmd.SetOut(os.Stderr)
		cmd.SetErr(os.Stderr)
		_ = cmd.ExecuteContext(ctx)
	}()
	t.Cleanup(func() { cancel(); stopped.Wait() })

	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		var got v1alpha1.Package
		if !assert.NoError(ct, c.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got)) {
			return
		}
		assert.True(ct, conditions.IsReady(&got) && got.Status.ObservedGeneration == got.Generation,
			"Ready: %s", conditions.GetMessage(&got, meta.ReadyCondition))
	}, 90*time.Second, 200*time.Millisecond)
	var applied corev1.ConfigMap
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "envdiff"}, &applied))
	require.Equal(t, "bonjour", applied.Data["greeting"], "the controller rendered spec.configFrom")
	require.NotEmpty(t, applied.Data["kubernetes"], "and .environment")

	stdout, stderr, err := runCLI(t, "diff", "package", "envdiff", "-n", ns, "--kubeconfig", mgmt.KubeconfigPath, "--registry-config", dockerConfig)
	assert.Equal(t, 0, exitCodeOf(err), "%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	assert.Empty(t, stdout, "nothing to change after the controller applied")
	assert.NotContains(t, stdout+stderr, "s3cret-from-configfrom")
}
