package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/test/testenv"
)

// TestApplyCommand runs `pkgsync apply` against real management and hosted control planes.
func TestApplyCommand(t *testing.T) {
	t.Parallel()
	mgmt := testenv.NewControlPlane(t, "management")
	hosted := testenv.NewControlPlane(t, "hosted")
	c, err := client.New(mgmt.Config, client.Options{})
	require.NoError(t, err)
	hc, err := client.New(hosted.Config, client.Options{})
	require.NoError(t, err)
	require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters-demo"}}))

	args := []string{"apply", "../../packages-example/hosted-addon", "--kubeconfig", mgmt.KubeconfigPath,
		"--hosted-kubeconfig", hosted.KubeconfigPath, "-n", "clusters-demo", "--name", "addon"}

	t.Run("dry run changes nothing", func(t *testing.T) {
		stdout, _, err := runCLI(t, append(args, "--dry-run")...)
		require.NoError(t, err)
		assert.Contains(t, stdout, "Namespace hosted-addon")
		var ns corev1.Namespace
		assert.True(t, apierrors.IsNotFound(hc.Get(t.Context(), client.ObjectKey{Name: "hosted-addon"}, &ns)))
	})

	t.Run("one pass stops at the phase that waits", func(t *testing.T) {
		_, stderr, err := runCLI(t, args...)
		require.NoError(t, err)
		assert.Contains(t, stderr, "deploy")
		var ns corev1.Namespace
		require.NoError(t, hc.Get(t.Context(), client.ObjectKey{Name: "hosted-addon"}, &ns), "phase 1 is in the hosted cluster")
		var cm corev1.ConfigMap
		assert.True(t, apierrors.IsNotFound(hc.Get(t.Context(), client.ObjectKey{Namespace: "hosted-addon", Name: "hosted-addon-config"}, &cm)),
			"phase 3 waits for the operator Deployment, which nothing makes available here")
	})

	t.Run("wait gives up at the timeout with the reason", func(t *testing.T) {
		_, _, err := runCLI(t, append(args, "--wait", "--timeout", "1s", "--interval", "200ms")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Deployment")
	})

	t.Run("without a hosted kubeconfig the hosted phase is refused", func(t *testing.T) {
		_, _, err := runCLI(t, "apply", "../../packages-example/hosted-addon", "--kubeconfig", mgmt.KubeconfigPath, "-n", "clusters-demo", "--name", "addon")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "hosted")
	})
}
