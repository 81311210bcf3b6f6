package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
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
	deployment := client.ObjectKey{Namespace: "clusters-demo", Name: "addon-operator"}

	t.Run("dry run changes nothing", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, append(args, "--dry-run=server")...)
		require.NoError(t, err)
		assert.Equal(t, `Namespace hosted-addon created (dry run)
ServiceAccount hosted-addon/hosted-addon-operator created (dry run)
ClusterRole.rbac.authorization.k8s.io hosted-addon-operator created (dry run)
ClusterRoleBinding.rbac.authorization.k8s.io hosted-addon-operator created (dry run)
Deployment.apps clusters-demo/addon-operator created (dry run)
ConfigMap hosted-addon/hosted-addon-config created (dry run)
Role.rbac.authorization.k8s.io hosted-addon/hosted-addon-config-reader created (dry run)
`, stdout, "every object of every phase, as it would change")
		assert.True(t, strings.HasSuffix(stderr, "\ndry run: nothing was changed\n"), "stderr:\n%s", stderr)
		assert.True(t, apierrors.IsNotFound(hc.Get(t.Context(), client.ObjectKey{Name: "hosted-addon"}, &corev1.Namespace{})), "nothing created on the hosted cluster")
		assert.True(t, apierrors.IsNotFound(c.Get(t.Context(), deployment, &appsv1.Deployment{})), "nothing created on the management cluster")
	})

	t.Run("-o json prints the result once, as a document", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, append(args, "--dry-run=server", "-o", "json")...)
		require.NoError(t, err, stderr)
		var report struct {
			DryRun   string `json:"dryRun"`
			Complete bool   `json:"complete"`
			Changes  []struct{ Object, Action string }
			Phases   []struct{ Name, Cluster, State string }
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &report), stdout)
		assert.Equal(t, "server", report.DryRun)
		require.Len(t, report.Changes, 7, "every object of every phase, as it would change")
		assert.Equal(t, "Deployment.apps clusters-demo/addon-operator", report.Changes[4].Object)
		assert.Equal(t, "created", report.Changes[4].Action)
		require.Len(t, report.Phases, 3)
		assert.Equal(t, "deploy", report.Phases[1].Name)
		assert.Equal(t, "management cluster", report.Phases[1].Cluster)
		assert.Contains(t, stderr, "dry run: nothing was changed", "progress stays on stderr")

		stdout, _, err = runCLI(t, append(args, "--dry-run=client", "-o", "yaml")...)
		require.NoError(t, err)
		assert.Contains(t, stdout, "dryRun: client\n")
		assert.Contains(t, stdout, "- object: Deployment.apps clusters-demo/addon-operator\n")

		_, _, err = runCLI(t, append(args, "-o", "wide")...)
		assert.Equal(t, 2, exitCodeOf(err), "a format apply does not print is a wrong command line")
	})

	t.Run("one pass stops at the phase that waits", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, args...)
		require.NoError(t, err)
		assert.Equal(t, `Namespace hosted-addon created
ServiceAccount hosted-addon/hosted-addon-operator created
ClusterRole.rbac.authorization.k8s.io hosted-addon-operator created
ClusterRoleBinding.rbac.authorization.k8s.io hosted-addon-operator created
Deployment.apps clusters-demo/addon-operator created
`, stdout, "phases 1 and 2 are applied, phase 3 is not")
		var phases, waiting []string
		for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			if strings.HasPrefix(line, "  waiting for ") {
				waiting = append(waiting, line)
			} else {
				phases = append(phases, line)
			}
		}
		assert.Equal(t, []string{
			"phase 1/3 hosted-rbac (hosted cluster): Complete",
			"phase 2/3 deploy (management cluster): Progressing",
			"phase 3/3 configure (hosted cluster): Pending",
			"phases in progress; run again or pass --wait",
		}, phases, "stderr:\n%s", stderr)
		if assert.NotEmpty(t, waiting, "the waiting phase says what it waits for") {
			for _, line := range waiting {
				assert.True(t, strings.HasPrefix(line, "  waiting for Deployment.apps clusters-demo/addon-operator: "), line)
			}
		}
		require.NoError(t, hc.Get(t.Context(), client.ObjectKey{Name: "hosted-addon"}, &corev1.Namespace{}), "phase 1 is in the hosted cluster")
		require.NoError(t, c.Get(t.Context(), deployment, &appsv1.Deployment{}), "phase 2 is on the management cluster")
		assert.True(t, apierrors.IsNotFound(hc.Get(t.Context(), client.ObjectKey{Namespace: "hosted-addon", Name: "hosted-addon-config"}, &corev1.ConfigMap{})),
			"phase 3 waits for the operator Deployment, which nothing makes available here")
	})

	t.Run("wait gives up at the timeout with the reason", func(t *testing.T) {
		start := time.Now()
		stdout, _, err := runCLI(t, append(args, "--wait", "--timeout", "1s", "--interval", "200ms")...)
		require.Error(t, err)
		assert.GreaterOrEqual(t, time.Since(start), time.Second, "--wait waits until --timeout")
		assert.True(t, strings.HasPrefix(err.Error(),
			"phases not complete after 1s: phase deploy on management cluster waiting for Deployment.apps clusters-demo/addon-operator: "), err.Error())
		assert.Empty(t, stdout, "nothing changed since the last pass")
	})

	t.Run("without a hosted kubeconfig the hosted phase is refused", func(t *testing.T) {
		require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters-refused"}}))
		stdout, _, err := runCLI(t, "apply", "../../packages-example/hosted-addon", "--kubeconfig", mgmt.KubeconfigPath, "-n", "clusters-refused", "--name", "addon")
		require.ErrorIs(t, err, apply.ErrNoTarget)
		var unavailable *apply.TargetUnavailableError
		require.ErrorAs(t, err, &unavailable)
		assert.Equal(t, v1alpha1.ClassHostedCluster, unavailable.Class)
		assert.EqualError(t, err, `phase hosted-rbac: cluster for phase class "hosted-cluster" unavailable: no target cluster given for this class: pass --hosted-kubeconfig for phases of class hosted-cluster`)
		assert.Empty(t, stdout, "nothing is applied")
		assert.True(t, apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKey{Namespace: "clusters-refused", Name: "addon-operator"}, &appsv1.Deployment{})),
			"the management phase after the refused one is not applied")
	})
}
