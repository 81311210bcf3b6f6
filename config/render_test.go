package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func containerImage(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	deploy := find(objs, "Deployment", DeploymentName)
	require.NotNil(t, deploy)
	containers, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.NotEmpty(t, containers)
	return containers[0].(map[string]any)["image"].(string)
}

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      Options
		namespace string
		image     string
	}{
		{"config/default as it is", Options{}, DefaultNamespace, "ghcr.io/pkgsync/pkgsync:latest"},
		{"another image", Options{Image: "registry.example.com/platform/pkgsync:v1@sha256:" + sha}, DefaultNamespace, "registry.example.com/platform/pkgsync:v1@sha256:" + sha},
		{"another namespace", Options{Namespace: "platform"}, "platform", "ghcr.io/pkgsync/pkgsync:latest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			objs, err := Render(tt.opts)
			require.NoError(t, err)
			assert.Equal(t, tt.image, containerImage(t, objs))

			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			assert.Equal(t, map[string]int{"CustomResourceDefinition": 6, "Namespace": 1, "ServiceAccount": 1,
				"ClusterRole": 2, "ClusterRoleBinding": 3, "Deployment": 1}, kinds)

			assert.NotNil(t, find(objs, "Namespace", tt.namespace), "the Namespace object is the controller's namespace")
			assert.Equal(t, tt.namespace, find(objs, "Deployment", DeploymentName).GetNamespace())
			assert.Equal(t, tt.namespace, find(objs, "ServiceAccount", "pkgsync-controller").GetNamespace())
			for _, o := range objs {
				if o.GetKind() != "ClusterRoleBinding" {
					continue
				}
				subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
				require.Len(t, subjects, 1)
				assert.Equal(t, tt.namespace, subjects[0].(map[string]any)["namespace"], "%s binds the controller's ServiceAccount", o.GetName())
			}
		})
	}
}

func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	deploy := find(objs, "Deployment", DeploymentName)
	require.NotNil(t, deploy)
	containers, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	return args
}

func TestRenderLockdown(t *testing.T) {
	t.Parallel()
	def, err := Render(Options{})
	require.NoError(t, err)
	locked, err := Render(Options{Variant: Lockdown, Namespace: "platform", Image: "registry.example.com/pkgsync:v1"})
	require.NoError(t, err)
	assert.Len(t, locked, len(def), "the same objects")
	assert.Contains(t, deploymentArgs(t, locked), "--default-service-account=pkgsync")
	assert.NotContains(t, deploymentArgs(t, def), "--default-service-account=pkgsync")
	assert.Equal(t, "platform", find(locked, "Deployment", DeploymentName).GetNamespace())
	assert.Equal(t, "registry.example.com/pkgsync:v1", containerImage(t, locked))

	_, err = Render(Options{Variant: "open"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"open"`)
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRenderRefusesABadNamespace(t *testing.T) {
	t.Parallel()
	_, err := Render(Options{Namespace: "Not_A_Namespace"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Not_A_Namespace")
}

// TestEmbeddedFilesAreTheConfig guards the go:embed patterns: every YAML file of the
// directories config/default builds from is embedded, and is the file on disk.
func TestEmbeddedFilesAreTheConfig(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"crd", "crd/bases", "rbac", "manager", "default", "lockdown"} {
		onDisk, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		require.NoError(t, err)
		require.NotEmpty(t, onDisk, dir)
		for _, name := range onDisk {
			want, err := os.ReadFile(name)
			require.NoError(t, err)
			got, err := fs.ReadFile(Manifests(), filepath.ToSlash(name))
			require.NoError(t, err, "%s is not embedded: add it to the go:embed patterns of embed.go", name)
			assert.Equal(t, string(want), string(got), name)
		}
	}
}
