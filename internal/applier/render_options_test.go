package applier

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
)

// On a management cluster that serves HyperShift's HostedCluster API, a Package Operator
// package sees .environment.hyperShift outside a hosted-control-plane namespace too, with
// hostedCluster null, as Package Operator shows it (issue 43).
func TestTemplateEnvironmentHyperShift(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  scopes: [Namespaced]\n  phases: [{name: one}]\n")},
		"cm.yaml.gotmpl": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  annotations: {package-operator.run/phase: one}
data:
  hyperShift: "{{ if hasKey .environment "hyperShift" }}served{{ else }}absent{{ end }}"
  hostedCluster: "{{ if hasKey .environment "hyperShift" }}{{ .environment.hyperShift.hostedCluster }}{{ end }}"
`)},
	}
	for served, want := range map[bool]string{true: "served", false: "absent"} {
		opts := render.Options{Name: "p", Namespace: "ns", Environment: templateEnvironment(reconciler.Options{HyperShift: served}, nil)}
		res, err := render.Render(t.Context(), fsys, opts)
		require.NoError(t, err)
		data := res.Phases[0].Objects[0].Object["data"].(map[string]any)
		assert.Equal(t, want, data["hyperShift"])
		if served {
			assert.Equal(t, "<no value>", data["hostedCluster"], "hostedCluster is null")
		}
	}
}
