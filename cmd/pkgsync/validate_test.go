package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeObjectsPackage writes a package of one phase, deploy, with files (path: content) beside its
// manifest.
func writeObjectsPackage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["manifest.yaml"] = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: objects}\nspec:\n  scopes: [Namespaced]\n  phases: [{name: deploy}]\n"
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	return dir
}

const inDeploy = "annotations: {pkgsync.dev/phase: deploy}"

// validate checks every object as the API server would: each of these is refused by one, and
// each is named with its file, document and field, at the field's own line (the document's first
// line for a problem of the object as a whole).
func TestValidateChecksObjectsAgainstSchemas(t *testing.T) {
	t.Parallel()
	dir := writeObjectsPackage(t, map[string]string{
		"deploy/typo.yaml": "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: typo, " + inDeploy + "}\n",
		"deploy/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: Bad_Name, namespace: Also_Bad, ` + inDeploy + `}
spec:
  replica: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/pause::3.10
        imagePullPolicy: Allways
`,
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config, " + inDeploy + "}\ndata: {k: 1}\n" +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, " + inDeploy + "}\ndata: {k: " + strings.Repeat("x", 2<<20) + "}\n",
	})
	var stdout, stderr bytes.Buffer
	code := run([]string{"validate", dir}, &stdout, &stderr)
	assert.Equal(t, 1, code, "stderr: %s", stderr.String())
	for _, want := range []string{
		"deploy/typo.yaml:2 (document 1): kind: Deploymnet typo: Deploymnet is not a kind of apps/v1; did you mean Deployment?",
		"deploy/app.yaml:5 (document 1): spec.replica: Deployment Also_Bad/Bad_Name: unknown field",
		"deploy/app.yaml:3 (document 1): metadata.name: Deployment Also_Bad/Bad_Name: \"Bad_Name\": a lowercase RFC 1123 subdomain",
		"deploy/app.yaml:3 (document 1): metadata.namespace: Deployment Also_Bad/Bad_Name: Invalid value: \"Also_Bad\"",
		"deploy/app.yaml:13 (document 1): spec.template.spec.containers[0].imagePullPolicy: Deployment Also_Bad/Bad_Name: \"Allways\": must be one of Always, IfNotPresent, Never",
		"deploy/app.yaml:12 (document 1): spec.template.spec.containers[0].image: Deployment Also_Bad/Bad_Name: \"registry.k8s.io/pause::3.10\" is not an image reference",
		"deploy/config.yaml:4 (document 1): data.k: ConfigMap config: must be a string, not 1 (quote it)",
		"deploy/config.yaml:9 (document 2): data: ConfigMap big: 2097153 bytes in all, over the 1048576 bytes (1 MiB)",
		"deploy/config.yaml:6 (document 2): ConfigMap big: the object is 2097232 bytes as JSON, over the 1572864 bytes (1.5 MiB)",
	} {
		assert.Contains(t, stderr.String(), want)
	}
	assert.Empty(t, stdout.String())
}

// The examples are valid Kubernetes objects, and a build checks them as validate does.
func TestValidateExamples(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"../../packages-example/simple", "../../packages-example/hosted-addon"} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 0, run([]string{"validate", dir}, &stdout, &stderr), "%s: %s", dir, stderr.String())
		assert.Equal(t, dir+": valid\n", stdout.String())
	}
}

const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

// A custom resource is checked against its CustomResourceDefinition, shipped in the package or
// given with --crds; without one it is reported as not checked, which does not fail.
func TestValidateCustomResources(t *testing.T) {
	t.Parallel()
	cr := "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g, " + inDeploy + "}\nspec: {size: big, colour: red}\n"
	unknown := writeObjectsPackage(t, map[string]string{"deploy/gadget.yaml": cr})
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run([]string{"validate", unknown}, &stdout, &stderr), stderr.String())
	assert.Equal(t, unknown+": valid\n", stdout.String())
	assert.Contains(t, stderr.String(), "1 kind not checked against a schema: example.com/v1 Gadget (no CustomResourceDefinition for it in the package or --crds)")

	crds := filepath.Join(t.TempDir(), "crds")
	require.NoError(t, os.MkdirAll(crds, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(crds, "gadget.yaml"), []byte(gadgetCRD), 0o600))
	for name, args := range map[string][]string{
		"given":   {"validate", unknown, "--crds", crds},
		"shipped": {"validate", writeObjectsPackage(t, map[string]string{"deploy/gadget.yaml": cr, "deploy/crd.yaml": strings.Replace(gadgetCRD, "metadata: {", "metadata: {"+inDeploy+", ", 1)})},
	} {
		stdout.Reset()
		stderr.Reset()
		assert.Equal(t, 1, run(args, &stdout, &stderr), "%s: %s", name, stderr.String())
		assert.Contains(t, stderr.String(), "deploy/gadget.yaml:4 (document 1): spec.colour: Gadget g: unknown field", name)
		assert.Contains(t, stderr.String(), "spec.size: Gadget g: Invalid value: \"string\": spec.size in body must be of type integer", name)
		assert.NotContains(t, stderr.String(), "not checked", name)
	}

	stderr.Reset()
	assert.Equal(t, 1, run([]string{"validate", unknown, "--crds", filepath.Join(crds, "missing.yaml")}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "--crds")
}

// An object of a kind validate has no schema for is still held to the API machinery's rules for
// every object: its name a DNS-1123 subdomain, its namespace a DNS-1123 label, its label values
// valid; each reported at its line, with the kind named as not checked otherwise.
func TestValidateNamesOfUnknownKinds(t *testing.T) {
	t.Parallel()
	dir := writeObjectsPackage(t, map[string]string{"deploy/widget.yaml": `apiVersion: example.com/v1
kind: Widget
metadata:
  name: Bad_Name
  namespace: Also_Bad
  labels: {app: "not valid"}
  ` + inDeploy + `
spec: {anything: 1}
`})
	_, stderr, err := runCLI(t, "validate", dir)
	assert.Equal(t, 1, exitCodeOf(err), stderr)
	for _, want := range []string{
		`deploy/widget.yaml:4 (document 1): metadata.name: Widget Also_Bad/Bad_Name: "Bad_Name": a lowercase RFC 1123 subdomain`,
		`deploy/widget.yaml:5 (document 1): metadata.namespace: Widget Also_Bad/Bad_Name: Invalid value: "Also_Bad"`,
		`metadata.labels: Widget Also_Bad/Bad_Name: Invalid value: "not valid"`,
		"1 kind not checked against a schema: example.com/v1 Widget",
	} {
		assert.Contains(t, stderr, want)
	}
	assert.Equal(t, 1, strings.Count(stderr, "metadata.labels:"), "the labels reported once: %s", stderr)
	assert.ErrorContains(t, err, "3 problem(s) found")
}

// build validates first, as validate does.
func TestBuildChecksObjects(t *testing.T) {
	t.Parallel()
	dir := writeObjectsPackage(t, map[string]string{"deploy/typo.yaml": "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: typo, " + inDeploy + "}\n"})
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"build", dir, "--archive", filepath.Join(t.TempDir(), "p.tar")}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "Deploymnet is not a kind of apps/v1; did you mean Deployment?")
}
