package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/test/testenv"
)

// nowhere is an API server address nothing listens on.
const nowhere = "https://127.0.0.1:1"

// writeKubeconfig writes cfg to a file of dir.
func writeKubeconfig(t *testing.T, dir, name string, cfg *clientcmdapi.Config) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// Every command that talks to a cluster reads kubectl's cluster flags: --kubeconfig, --context
// and $KUBECONFIG, a list of files merged as kubectl merges them. Not parallel: it sets
// $KUBECONFIG.
func TestClusterFlags(t *testing.T) {
	mgmt := testenv.NewControlPlane(t, "management")
	c, err := client.New(mgmt.Config, client.Options{})
	require.NoError(t, err)
	require.NoError(t, c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}))
	pkg := writeDiffPackage(t)

	// The management cluster's kubeconfig, and one whose only context points nowhere.
	dir := t.TempDir()
	mgmtConfig, err := clientcmd.LoadFromFile(mgmt.KubeconfigPath)
	require.NoError(t, err)
	mgmtContext := mgmtConfig.CurrentContext
	require.NotEmpty(t, mgmtContext)
	lost := clientcmdapi.NewConfig()
	lost.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: nowhere, InsecureSkipTLSVerify: true}
	lost.AuthInfos["nowhere"] = &clientcmdapi.AuthInfo{Token: "t"}
	lost.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "nowhere"}
	lost.CurrentContext = "nowhere"
	lostPath := writeKubeconfig(t, dir, "nowhere.kubeconfig", lost)
	// One file with both contexts, the current one pointing nowhere.
	both := mgmtConfig.DeepCopy()
	both.Clusters["nowhere"] = lost.Clusters["nowhere"]
	both.AuthInfos["nowhere"] = lost.AuthInfos["nowhere"]
	both.Contexts["nowhere"] = lost.Contexts["nowhere"]
	both.CurrentContext = "nowhere"
	bothPath := writeKubeconfig(t, dir, "both.kubeconfig", both)

	diffArgs := []string{"diff", pkg, "-n", "team", "--name", "diffed"}
	applyArgs := []string{"apply", pkg, "-n", "team", "--name", "diffed", "--dry-run=server", "--hosted-kubeconfig", mgmt.KubeconfigPath}

	t.Run("diff and apply read $KUBECONFIG", func(t *testing.T) {
		// The first file's current-context wins, as for kubectl.
		t.Setenv("KUBECONFIG", mgmt.KubeconfigPath+string(os.PathListSeparator)+lostPath)
		stdout, stderr, err := runCLI(t, diffArgs...)
		assert.Equal(t, 1, exitCodeOf(err), "differences found: %v\n%s", err, stderr)
		assert.Contains(t, stdout, "diff -u -N live/v1.ConfigMap.team.diffed merged/v1.ConfigMap.team.diffed\n")

		stdout, _, err = runCLI(t, applyArgs...)
		require.NoError(t, err)
		assert.Contains(t, stdout, "ConfigMap team/diffed created (dry run)\n")
	})

	t.Run("$KUBECONFIG is a list: the first current-context, --context picks another", func(t *testing.T) {
		t.Setenv("KUBECONFIG", lostPath+string(os.PathListSeparator)+mgmt.KubeconfigPath)
		_, _, err := runCLI(t, diffArgs...)
		assert.Equal(t, diffExitError, exitCodeOf(err), "could not run: %v", err)
		assert.ErrorContains(t, err, "127.0.0.1:1")

		_, _, err = runCLI(t, append(diffArgs, "--context", mgmtContext)...)
		assert.Equal(t, 1, exitCodeOf(err), "the context of the second file: %v", err)
		_, _, err = runCLI(t, append(applyArgs, "--context", mgmtContext)...)
		require.NoError(t, err)
	})

	t.Run("--context selects a context of --kubeconfig", func(t *testing.T) {
		_, _, err := runCLI(t, append(diffArgs, "--kubeconfig", bothPath)...)
		assert.Equal(t, diffExitError, exitCodeOf(err), "the current context points nowhere: %v", err)
		assert.ErrorContains(t, err, "127.0.0.1:1")
		_, _, err = runCLI(t, append(diffArgs, "--kubeconfig", bothPath, "--context", mgmtContext)...)
		assert.Equal(t, 1, exitCodeOf(err), "%v", err)
		_, _, err = runCLI(t, append(applyArgs, "--kubeconfig", bothPath, "--context", mgmtContext)...)
		require.NoError(t, err)
		_, _, err = runCLI(t, append(applyArgs, "--kubeconfig", bothPath)...)
		assert.ErrorContains(t, err, "127.0.0.1:1")

		_, _, err = runCLI(t, append(diffArgs, "--kubeconfig", bothPath, "--context", "missing")...)
		assert.ErrorContains(t, err, `context "missing" does not exist`)
	})

	t.Run("fleet plan that cannot run exits 3, not 1 (a member would fail)", func(t *testing.T) {
		_, _, err := runCLI(t, "fleet", "plan", "hosted-addon", "--kubeconfig", bothPath)
		assert.Equal(t, diffExitError, exitCodeOf(err), "unreachable: %v", err)
		_, _, err = runCLI(t, "fleet", "plan", "hosted-addon", "--kubeconfig", bothPath, "--context", mgmtContext)
		assert.Equal(t, diffExitError, exitCodeOf(err), "the API is not installed: %v", err)
		assert.ErrorContains(t, err, "HostedClusterPackage API is not installed")
	})

	t.Run("install, uninstall and fleet take the same flags", func(t *testing.T) {
		for _, args := range [][]string{
			{"fleet", "status", "hosted-addon"},
			{"fleet", "plan", "hosted-addon"},
			{"install", "--image", "registry.example.com/pkgsync:v1", "--dry-run=server"},
			{"uninstall", "--wait=false"},
		} {
			_, _, err := runCLI(t, append(args, "--kubeconfig", bothPath)...)
			assert.ErrorContains(t, err, "127.0.0.1:1", "%q: the current context", args)
			_, _, err = runCLI(t, append(args, "--kubeconfig", bothPath, "--context", mgmtContext)...)
			if err != nil {
				assert.NotContains(t, err.Error(), "127.0.0.1:1", "%q --context %s", args, mgmtContext)
			}
		}
	})
}

// nowhereKubeconfig writes a kubeconfig whose only context points nowhere, in namespace ns
// ("" for none), and returns its path.
func nowhereKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: nowhere, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["nowhere"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "nowhere", Namespace: ns}
	cfg.CurrentContext = "nowhere"
	return writeKubeconfig(t, t.TempDir(), "nowhere.kubeconfig", cfg)
}

// -n defaults to the kubeconfig context's namespace, "default" when it sets none, as kubectl's
// does, on every command that takes a namespace and talks to a cluster (apply, diff).
func TestNamespaceDefaultsToTheContexts(t *testing.T) {
	t.Parallel()
	pkg := writeDiffPackage(t)
	team, none := nowhereKubeconfig(t, "team"), nowhereKubeconfig(t, "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"diff package, the context's namespace", []string{"diff", "package", "p", "--kubeconfig", team}, "get Package team/p"},
		{"diff package, -n wins", []string{"diff", "package", "p", "--kubeconfig", team, "-n", "other"}, "get Package other/p"},
		{"diff package, a context without namespace", []string{"diff", "package", "p", "--kubeconfig", none}, "get Package default/p"},
		{"apply, the context's namespace", []string{"apply", pkg, "--kubeconfig", team, "--dry-run=client"}, "namespace team\n"},
		{"apply, -n wins", []string{"apply", pkg, "--kubeconfig", team, "-n", "other", "--dry-run=client"}, "namespace other\n"},
		{"apply, a context without namespace", []string{"apply", pkg, "--kubeconfig", none, "--dry-run=client"}, "namespace default\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, err := runCLI(t, tt.args...)
			if err != nil {
				assert.ErrorContains(t, err, tt.want)
				assert.Equal(t, diffExitError, exitCodeOf(err), "could not run: %v", err)
				return
			}
			assert.Contains(t, stderr, tt.want)
		})
	}
}
