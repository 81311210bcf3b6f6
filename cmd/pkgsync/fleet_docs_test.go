package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/notify"
	"pkgsync.dev/pkgsync/test/testenv"
)

// TestFleetGuideIsAccepted sends the HostedClusterPackages and the kubectl patches of
// docs/fleet.md to a real API server with the CRD, with strict field validation: the guide
// names only fields the CRD has, with values its validation accepts.
func TestFleetGuideIsAccepted(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "fleet.md"))
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	patches := regexp.MustCompile(`(?s)kubectl patch hcpkg \S+ --type merge\s+(?:\\\s+)?-p '([^']*)'`).FindAllStringSubmatch(string(guide), -1)
	require.Len(t, blocks, 5, "YAML blocks in docs/fleet.md")
	require.Len(t, patches, 9, "kubectl patch commands in docs/fleet.md")

	cp := testenv.NewControlPlane(t, "fleet-docs")
	_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "config", "crd", "bases", "pkgsync.dev_hostedclusterpackages.yaml")},
	})
	require.NoError(t, err)
	c, err := client.New(cp.Config, client.Options{FieldValidation: "Strict"})
	require.NoError(t, err)

	var fleets []*unstructured.Unstructured
	for i, b := range blocks {
		obj := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(b[1]), &obj.Object), "YAML block %d", i+1)
		if obj.GetKind() == "ClusterRole" {
			continue // RBAC for the reader to copy: the API server's own types.
		}
		if obj.GetKind() == "Secret" {
			// The notification Secret: its configuration is one the controller takes.
			config, _, _ := unstructured.NestedString(obj.Object, "stringData", notify.ConfigKey)
			_, err := notify.ParseConfig([]byte(config))
			assert.NoError(t, err, "YAML block %d: %s", i+1, notify.ConfigKey)
			continue
		}
		require.Equal(t, v1alpha1.HostedClusterPackageKind, obj.GetKind(), "YAML block %d", i+1)
		assert.NoError(t, c.Create(t.Context(), obj.DeepCopy(), client.DryRunAll), "YAML block %d:\n%s", i+1, b[1])
		fleets = append(fleets, obj)
	}
	// The maintenance windows the guide writes on a HostedCluster are ones the controller reads.
	clusterWindows := regexp.MustCompile(regexp.QuoteMeta(v1alpha1.MaintenanceWindowsAnnotation)+`='([^']*)'`).FindAllStringSubmatch(string(guide), -1)
	require.Len(t, clusterWindows, 1, "kubectl annotate commands writing %s in docs/fleet.md", v1alpha1.MaintenanceWindowsAnnotation)
	for _, w := range clusterWindows {
		_, err := rollout.ParseClusterWindows(w[1])
		assert.NoError(t, err, "%s=%s", v1alpha1.MaintenanceWindowsAnnotation, w[1])
	}

	// The patches go to the fleet of the first block, as the guide applies them.
	created := fleets[0]
	require.NoError(t, c.Create(t.Context(), created))
	t.Cleanup(func() { _ = c.Delete(t.Context(), created) })
	for _, p := range patches {
		assert.NoError(t, c.Patch(t.Context(), created.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p[1])), client.DryRunAll), "patch %s", p[1])
	}
}
