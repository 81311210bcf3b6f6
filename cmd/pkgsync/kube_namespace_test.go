package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

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

// diff against a cluster it cannot reach says so once, not once per object.
func TestDiffUnreachableClusterOneError(t *testing.T) {
	t.Parallel()
	_, _, err := runCLI(t, "diff", writeDiffPackage(t), "--kubeconfig", nowhereKubeconfig(t, "team"))
	require.Error(t, err)
	assert.Equal(t, diffExitError, exitCodeOf(err))
	assert.Equal(t, 1, strings.Count(err.Error(), "connection refused"), "%v", err)
	assert.NotContains(t, err.Error(), "would not be applied", "the objects were never compared")
}
