package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/config"
	"pkgsync.dev/pkgsync/test/testenv"
)

// TestReleaseManifests checks dist/install.yaml as make release writes it (pkgsync install
// --export with the image pinned by digest) against a real API server, doing what
// `kubectl apply --server-side [--dry-run=server] -f dist/install.yaml` does: every document
// applied in file order with field manager kubectl. kubectl may be missing where tests run, so
// the requests are sent from here.
func TestReleaseManifests(t *testing.T) {
	t.Parallel()
	cp := testenv.NewControlPlane(t, "release")
	c, err := client.New(cp.Config, client.Options{})
	require.NoError(t, err)
	pinned := "ghcr.io/pkgsync/pkgsync:v1.2.3@sha256:" + strings.Repeat("0f", 32)
	stdout, _, err := runCLI(t, "install", "--export", "--image", pinned)
	require.NoError(t, err)
	objs := decodeYAMLStream(t, stdout)
	require.NotEmpty(t, objs)
	kubectlApply := func(dryRun bool) error {
		for _, obj := range objs {
			opts := []client.ApplyOption{client.FieldOwner("kubectl")}
			if dryRun {
				opts = append(opts, client.DryRunAll)
			}
			if err := c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), opts...); err != nil {
				return err
			}
		}
		return nil
	}

	t.Run("a server-side dry run passes", func(t *testing.T) {
		// A dry run cannot check objects inside a namespace that does not exist, with kubectl
		// as here: the first document, the Namespace, is created first.
		require.Equal(t, "Namespace", objs[0].GetKind())
		require.NoError(t, c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(objs[0].DeepCopy()), client.FieldOwner("kubectl")))
		require.NoError(t, kubectlApply(true))
		// And with kubectl itself where it is installed.
		if kubectl, err := exec.LookPath("kubectl"); err == nil {
			file := filepath.Join(t.TempDir(), "install.yaml")
			require.NoError(t, os.WriteFile(file, []byte(stdout), 0o600))
			out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", cp.KubeconfigPath,
				"apply", "--server-side", "--dry-run=server", "-f", file).CombinedOutput()
			require.NoError(t, err, "kubectl apply --server-side --dry-run=server -f install.yaml:\n%s", out)
			assert.Contains(t, string(out), "deployment.apps/"+config.DeploymentName+" serverside-applied (server dry run)")
		} else {
			t.Log("kubectl not in PATH: the dry run went through controller-runtime only")
		}
		err := c.Get(t.Context(), client.ObjectKey{Namespace: config.DefaultNamespace, Name: config.DeploymentName}, &appsv1.Deployment{})
		assert.True(t, apierrors.IsNotFound(err), "the dry run created nothing: %v", err)
	})

	t.Run("applied, it is what pkgsync install applies", func(t *testing.T) {
		require.NoError(t, kubectlApply(false))
		deployKey := client.ObjectKey{Namespace: config.DefaultNamespace, Name: config.DeploymentName}
		var before appsv1.Deployment
		require.NoError(t, c.Get(t.Context(), deployKey, &before))
		assert.Equal(t, pinned, deploymentImage(&before), "the image is pinned by digest")

		// install of the same release image takes the fields over from kubectl (so that a later
		// release can drop some) and changes nothing else: the Deployment's spec is the same.
		stdout, stderr, err := runCLI(t, "install", "--kubeconfig", cp.KubeconfigPath, "--image", pinned, "--wait=false")
		require.NoError(t, err, stderr)
		assert.Contains(t, stdout, apply.RefOf(objs[len(objs)-1]).String()+" configured\n")
		assert.NotContains(t, stdout, " created")
		var after appsv1.Deployment
		require.NoError(t, c.Get(t.Context(), deployKey, &after))
		assert.Equal(t, before.Generation, after.Generation, "the spec did not change")
		assert.Equal(t, before.Spec, after.Spec)

		stdout, stderr, err = runCLI(t, "install", "--kubeconfig", cp.KubeconfigPath, "--image", pinned, "--wait=false")
		require.NoError(t, err, stderr)
		assert.Equal(t, len(objs), strings.Count(stdout, " unchanged\n"), "then there is nothing left to do:\n%s", stdout)
	})
}
