package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestLockdownOverlay builds config/lockdown and checks that the controller accepts every
// argument it sets and that the lockdown flags are there.
func TestLockdownOverlay(t *testing.T) {
	t.Parallel()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "../../config/lockdown")
	require.NoError(t, err)
	var args []string
	for _, r := range res.Resources() {
		if r.GetKind() != "Deployment" || r.GetName() != "pkgsync-controller" {
			continue
		}
		m, err := r.Map()
		require.NoError(t, err)
		// kyaml decodes integers as int, which the unstructured helpers cannot copy: walk by hand.
		containers, _, _ := unstructured.NestedFieldNoCopy(m, "spec", "template", "spec", "containers")
		list, ok := containers.([]any)
		require.True(t, ok)
		require.Len(t, list, 1)
		for _, a := range list[0].(map[string]any)["args"].([]any) {
			args = append(args, a.(string))
		}
	}
	require.NotEmpty(t, args, "the overlay holds the controller Deployment")
	assert.Equal(t, "controller", args[0])
	assert.Contains(t, args, "--default-service-account=pkgsync")

	cmd := newControllerCmd()
	require.NoError(t, cmd.ParseFlags(args[1:]), "every argument is a flag of pkgsync controller")
	for _, f := range []string{"insecure-kubeconfig-exec", "insecure-kubeconfig-tls", "insecure-kubeconfig-any-server", "allow-cross-namespace"} {
		assert.Equal(t, "false", cmd.Flags().Lookup(f).Value.String(), f)
	}
	assert.Equal(t, "HostedCluster", cmd.Flags().Lookup("hosted-namespace-rule").Value.String())
	assert.False(t, strings.Contains(strings.Join(args, " "), "insecure-kubeconfig-exec=true"))
}
