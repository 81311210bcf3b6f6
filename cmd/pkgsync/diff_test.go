package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// writeDiffPackage writes a package of a ConfigMap and a Secret whose values come from the
// configuration, and a hosted-cluster phase.
func writeDiffPackage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"manifest.yaml": `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata:
  name: diffed
spec:
  scopes: [Namespaced]
  phases:
  - name: deploy
  - name: inside
    class: hosted-cluster
  config:
    openAPIV3Schema:
      type: object
      properties:
        greeting: {type: string, default: hello}
        password: {type: string, default: s3cret-one}
`,
		"deploy/objects.yaml.gotmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: diffed
  annotations: {pkgsync.dev/phase: deploy}
data:
  greeting: {{ .config.greeting | quote }}
---
apiVersion: v1
kind: Secret
metadata:
  name: diffed
  annotations: {pkgsync.dev/phase: deploy}
stringData:
  password: {{ .config.password | quote }}
  user: admin
`,
		"inside/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n  namespace: default\n  annotations: {pkgsync.dev/phase: inside}\n",
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	return dir
}

// pkgsync diff against a real API server: a new object is shown created, nothing after an
// apply, a changed value after a change, a Secret's values never.
func TestDiffCommand(t *testing.T) {
	t.Parallel()
	mgmt := testenv.NewControlPlane(t, "management")
	c, err := client.New(mgmt.Config, client.Options{})
	require.NoError(t, err)
	require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}))
	pkg := writeDiffPackage(t)
	config := func(greeting, password string) string {
		f := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(f, []byte("greeting: "+greeting+"\npassword: "+password+"\n"), 0o600))
		return f
	}
	diff := func(args ...string) (string, string, error) {
		return runCLI(t, append([]string{"diff", pkg, "--kubeconfig", mgmt.KubeconfigPath, "-n", "team", "--name", "diffed"}, args...)...)
	}

	t.Run("new objects are shown created, secret values masked", func(t *testing.T) {
		stdout, stderr, err := diff("--config", config("hello", "s3cret-one"))
		assert.Equal(t, 1, exitCodeOf(err), "%v", err)
		assert.Contains(t, stdout, "diff -u -N live/v1.ConfigMap.team.diffed merged/v1.ConfigMap.team.diffed\n")
		assert.Contains(t, stdout, "+  greeting: hello\n")
		assert.Contains(t, stdout, "diff -u -N live/v1.Secret.team.diffed merged/v1.Secret.team.diffed\n")
		assert.Contains(t, stdout, "+  password: '*** (changed)'\n")
		assert.NotContains(t, stdout, "s3cret")
		assert.NotContains(t, stdout, "czNjcmV0", "nor base64")
		assert.NotContains(t, stdout, "YWRtaW4", "nor the other key's value")
		assert.Contains(t, stderr, "phase inside (class hosted-cluster) skipped")
		require.True(t, apierrorsNotFound(t, c, "diffed"), "nothing created")
	})

	_, _, err = runCLI(t, "apply", pkg, "--kubeconfig", mgmt.KubeconfigPath, "--hosted-kubeconfig", mgmt.KubeconfigPath, "-n", "team", "--name", "diffed",
		"--config", config("hello", "s3cret-one"))
	require.NoError(t, err)

	t.Run("no differences after an apply", func(t *testing.T) {
		stdout, _, err := diff("--config", config("hello", "s3cret-one"), "--hosted-kubeconfig", mgmt.KubeconfigPath)
		require.NoError(t, err)
		assert.Empty(t, stdout)
	})

	t.Run("a changed field and a changed secret value", func(t *testing.T) {
		stdout, _, err := diff("--config", config("bonjour", "s3cret-two"))
		assert.Equal(t, 1, exitCodeOf(err), "%v", err)
		assert.Contains(t, stdout, "-  greeting: hello\n+  greeting: bonjour\n")
		assert.Contains(t, stdout, "-  password: '***'\n+  password: '*** (changed)'\n")
		assert.Contains(t, stdout, "   user: '***'\n", "an unchanged value is masked too")
		assert.NotContains(t, stdout, "s3cret")
		assert.NotContains(t, stdout, "czNjcmV0")
		assert.Contains(t, stdout, "-    pkgsync.dev/desired-hash: ", "the ConfigMap's hash is shown")
		assert.Equal(t, 1, strings.Count(stdout, "-    pkgsync.dev/desired-hash: "), "the Secret's is masked:\n%s", stdout)
		assert.NotContains(t, stdout, "managedFields")
		assert.NotContains(t, stdout, "resourceVersion")
	})

	t.Run("diff package reads the Package's spec", func(t *testing.T) {
		reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
		ref := reg.Host + "/" + testenv.Repository(t, "diffed") + ":v1"
		dockerConfig := emptyDockerConfig(t)
		_, err := runPkgsync(t, "push", pkg, ref, "--version", "1", "--registry-config", dockerConfig)
		require.NoError(t, err)
		scheme := runtime.NewScheme()
		require.NoError(t, clientgoscheme.AddToScheme(scheme))
		require.NoError(t, v1alpha1.AddToScheme(scheme))
		tc, err := client.New(mgmt.Config, client.Options{Scheme: scheme})
		require.NoError(t, err)
		_, err = envtest.InstallCRDs(mgmt.Config, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join("..", "..", "config", "crd", "bases", "pkgsync.dev_packages.yaml")},
		})
		require.NoError(t, err)
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "diffed"},
			Spec: v1alpha1.PackageSpec{Image: ref, Config: &apiextensionsv1.JSON{Raw: []byte(`{"greeting":"hola","password":"s3cret-one"}`)}}}
		require.NoError(t, tc.Create(t.Context(), p))
		stdout, _, err := runCLI(t, "diff", "package", "diffed", "-n", "team", "--kubeconfig", mgmt.KubeconfigPath, "--registry-config", dockerConfig)
		assert.Equal(t, 1, exitCodeOf(err), "%v", err)
		assert.Contains(t, stdout, "-  greeting: hello\n+  greeting: hola\n")
		assert.NotContains(t, stdout, "Secret", "the Secret is as applied")
	})

	t.Run("errors exit 3, usage 2", func(t *testing.T) {
		_, _, err := runCLI(t, "diff", pkg, "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "-n", "team")
		assert.Equal(t, 3, exitCodeOf(err), "%v", err)
		_, _, err = runCLI(t, "diff", pkg, "extra", "arguments")
		assert.Equal(t, 2, exitCodeOf(err), "%v", err)
		_, _, err = runCLI(t, "diff", "package", "x", "--kubeconfig", mgmt.KubeconfigPath)
		assert.Equal(t, 3, exitCodeOf(err), "-n defaults to the context's namespace: %v", err)
		assert.ErrorContains(t, err, "get Package default/x")
	})
}

func apierrorsNotFound(t *testing.T, c client.Client, name string) bool {
	t.Helper()
	err := c.Get(t.Context(), client.ObjectKey{Namespace: "team", Name: name}, &corev1.ConfigMap{})
	return err != nil && strings.Contains(err.Error(), "not found")
}

// diff against a cluster it cannot reach says so once, not once per object.
func TestDiffUnreachableClusterOneError(t *testing.T) {
	t.Parallel()
	_, _, err := runCLI(t, "diff", writeDiffPackage(t), "--kubeconfig", nowhereKubeconfig(t, "team"))
	require.Error(t, err)
	assert.Equal(t, diffExitError, exitCodeOf(err))
	assert.Equal(t, 1, strings.Count(err.Error(), "connection refused"), "%v", err)
	assert.NotContains(t, err.Error(), "would not be applied", "the objects were never compared")
}
