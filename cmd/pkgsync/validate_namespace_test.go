package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// namespacePackage is a package with a management phase and a hosted-cluster phase, its
// manifest listing scopes and its objects files.
func namespacePackage(t *testing.T, scopes string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	tree := map[string]string{"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n" +
		"  scopes: " + scopes + "\n  phases:\n  - name: deploy\n  - name: hosted\n    class: hosted-cluster\n"}
	for name, data := range files {
		tree[name] = data
	}
	testenv.WriteTree(t, dir, tree)
	return dir
}

// object is a YAML object in a phase.
func object(apiVersion, kind, namespace, name, phase string) string {
	s := "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n"
	if namespace != "" {
		s += "  namespace: " + namespace + "\n"
	}
	return s + "  annotations:\n    pkgsync.dev/phase: " + phase + "\n"
}

// validateJSON runs validate -o json and returns its exit code and result.
func validateJSON(t *testing.T, args ...string) (int, validateResult) {
	t.Helper()
	out, _, err := runCLI(t, append([]string{"validate", "-o", "json"}, args...)...)
	var res validateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), "%s %v", out, err)
	return exitCodeOf(err), res
}

// validate -n reports what the controller refuses of a Package in that namespace (without
// --allow-cross-namespace): objects of the management cluster outside the namespace,
// cluster-scoped kinds among them, and a manifest whose spec.scopes leaves out Namespaced. The
// hosted cluster's phases are not confined. Without -n nothing of this is checked.
func TestValidateNamespaceConfinement(t *testing.T) {
	t.Parallel()
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n" +
		"  annotations:\n    pkgsync.dev/phase: deploy\nspec:\n  group: example.com\n  scope: Cluster\n  names: {kind: Widget, plural: widgets}\n" +
		"  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
	dir := namespacePackage(t, "[Cluster]", map[string]string{
		"deploy/ok.yaml":      object("v1", "ConfigMap", "", "ok", "deploy") + "---\n" + object("v1", "ConfigMap", "team", "here", "deploy"),
		"deploy/other.yaml":   object("v1", "ConfigMap", "other", "elsewhere", "deploy"),
		"deploy/rbac.yaml":    object("v1", "ConfigMap", "", "before", "deploy") + "---\n" + object("rbac.authorization.k8s.io/v1", "ClusterRole", "team", "reader", "deploy"),
		"deploy/crd.yaml":     object("example.com/v1", "Widget", "", "w", "deploy"),
		"deploy/widgets.yaml": crd,
		"deploy/what.yaml":    object("unknown.example.com/v1", "Gadget", "", "g", "deploy"),
		"hosted/ns.yaml":      object("v1", "Namespace", "", "anywhere", "hosted") + "---\n" + object("v1", "ConfigMap", "kube-system", "x", "hosted"),
	})

	code, res := validateJSON(t, dir)
	assert.Equal(t, 0, code, "without -n nothing changes: %v", res.Problems)

	code, res = validateJSON(t, dir, "-n", "team")
	assert.Equal(t, 1, code)
	got := map[string]validateProblem{}
	for _, p := range res.Problems {
		got[p.File] = p
	}
	assert.Len(t, res.Problems, 5, "%+v", res.Problems)
	assert.Equal(t, "spec.scopes", got["manifest.yaml"].Field)
	assert.Contains(t, got["manifest.yaml"].Message, "does not support the Namespaced scope")
	assert.Contains(t, got["manifest.yaml"].Message, "add Namespaced to spec.scopes")
	assert.Contains(t, got["deploy/other.yaml"].Message, "ConfigMap other/elsewhere is in namespace other, outside the Package's namespace team")
	assert.Equal(t, 1, got["deploy/other.yaml"].Line)
	assert.Contains(t, got["deploy/rbac.yaml"].Message, "ClusterRole reader is cluster-scoped")
	assert.Contains(t, got["deploy/rbac.yaml"].Message, "--allow-cross-namespace")
	assert.Equal(t, 8, got["deploy/rbac.yaml"].Line)
	assert.Equal(t, 2, got["deploy/rbac.yaml"].Document)
	assert.Contains(t, got["deploy/crd.yaml"].Message, "Widget w is cluster-scoped", "by the package's own CRD")
	assert.Contains(t, got["deploy/widgets.yaml"].Message, "CustomResourceDefinition widgets.example.com is cluster-scoped")
	assert.NotContains(t, got, "deploy/what.yaml", "a kind nothing describes is not guessed at")
	assert.NotContains(t, got, "hosted/ns.yaml", "the hosted cluster is not confined")

	code, res = validateJSON(t, namespacePackage(t, "[Namespaced]", map[string]string{"deploy/ok.yaml": object("v1", "ConfigMap", "", "ok", "deploy")}), "-n", "team")
	assert.Equal(t, 0, code, "%+v", res.Problems)
}

// validate --scope Cluster checks the manifest's scopes as a ClusterPackage's; --scope
// Namespaced needs -n, a ClusterPackage has no namespace.
func TestValidateScope(t *testing.T) {
	t.Parallel()
	dir := namespacePackage(t, "[Namespaced]", map[string]string{"deploy/cr.yaml": object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r", "deploy")})
	code, res := validateJSON(t, dir, "--scope", "Cluster")
	assert.Equal(t, 1, code)
	require.Len(t, res.Problems, 1)
	assert.Equal(t, "manifest.yaml", res.Problems[0].File)
	assert.Contains(t, res.Problems[0].Message, "does not support the Cluster scope")
	assert.Contains(t, res.Problems[0].Message, "add Cluster to spec.scopes")

	code, _ = validateJSON(t, namespacePackage(t, "[Cluster]", nil), "--scope", "Cluster")
	assert.Equal(t, 0, code)
	for _, args := range [][]string{{"--scope", "Cluster", "-n", "team"}, {"--scope", "Namespaced"}, {"--scope", "cluster"}} {
		_, _, err := runCLI(t, append([]string{"validate", dir}, args...)...)
		assert.Equal(t, 2, exitCodeOf(err), "%v", args)
	}
}

// render -n warns of what the controller would refuse of a Package in that namespace, and
// renders all the same: its output may go to kubectl.
func TestRenderWarnsOfNamespaceConfinement(t *testing.T) {
	t.Parallel()
	dir := namespacePackage(t, "[Namespaced]", map[string]string{
		"deploy/rbac.yaml": object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader", "deploy"),
	})
	out, stderr, err := runCLI(t, "render", dir, "-n", "team")
	require.NoError(t, err)
	assert.Contains(t, out, "kind: ClusterRole")
	assert.Equal(t, "Warning: deploy/rbac.yaml:1 (document 1): kind: ClusterRole reader is cluster-scoped, and a Package in namespace team may only create "+
		"objects in its own namespace on the management cluster: "+confinementHint+"\n", stderr)

	_, stderr, err = runCLI(t, "render", dir)
	require.NoError(t, err)
	assert.Empty(t, stderr, "without -n nothing changes")
}
