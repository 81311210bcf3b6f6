package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requiredImage is a Package Operator manifest whose schema requires image, with a test case
// giving it.
const requiredImage = `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: NAME}
spec:
  scopes: [Namespaced, Cluster]
  phases: [{name: deploy}]
  config:
    openAPIV3Schema:
      type: object
      required: [image]
      properties: {image: {type: string}}
test:
  template:
  - name: one
    context: {config: {image: img-x}, package: {metadata: {name: p, namespace: ns}}}
  - name: two
    context: {config: {image: img-y}, package: {metadata: {name: p}}}
`

// deployment is a template of a Deployment in the phase given, with the configured image.
func deployment(phase string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations: {package-operator.run/phase: " + phase + "}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers: [{name: c, image: '{{ .config.image }}'}]\n")}
}

// Package Operator's "kubectl package validate DIR" checks the package without a configuration
// of its own and renders every test case with the case's: a package whose schema requires
// values is valid when its cases give them. Given a configuration, validate checks that one too.
func TestValidatePackageRendersTestCases(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"manifest.yaml":          {Data: []byte(strings.ReplaceAll(requiredImage, "NAME", "p"))},
		"deployment.yaml.gotmpl": deployment("deploy"),
	}
	require.NoError(t, validateErr(ValidatePackage(t.Context(), fsys, Options{}, WithoutConfig)))

	err := validateErr(ValidatePackage(t.Context(), fsys, Options{}, WithConfig))
	require.Error(t, err)
	assert.Equal(t, "invalid configuration: config.image: Required value", err.Error())
	require.NoError(t, validateErr(ValidatePackage(t.Context(), fsys, Options{Config: []byte(`{image: z}`)}, WithConfig)))

	// A case that breaks the package is reported under its name, every case that does.
	fsys["deployment.yaml.gotmpl"] = deployment("{{ if .package.metadata.namespace }}deploy{{ else }}nowhere{{ end }}")
	err = validateErr(ValidatePackage(t.Context(), fsys, Options{}, WithoutConfig))
	require.Error(t, err)
	var problems Errors
	require.True(t, errors.As(err, &problems))
	require.Len(t, problems, 1)
	assert.Equal(t, `test case two: deployment.yaml.gotmpl:1 (document 1): metadata.annotations: Deployment d: unknown phase "nowhere": the manifest declares deploy`, problems[0].Error())
}

// In a multi-component package every component's cases run (Package Operator's own test data
// has a component whose template names a phase its manifest lacks, found only so), or only the
// selected component's. A problem the package check or an earlier case found is not repeated.
func TestValidatePackageComponentsAndRepeats(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"manifest.yaml":                              {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: shop}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n  components: {}\n")},
		"components/backend/manifest.yaml":           {Data: []byte(strings.ReplaceAll(requiredImage, "NAME", "backend"))},
		"components/backend/deployment.yaml.gotmpl":  deployment("purposely-wrong"),
		"components/frontend/manifest.yaml":          {Data: []byte(strings.ReplaceAll(requiredImage, "NAME", "frontend"))},
		"components/frontend/deployment.yaml.gotmpl": deployment("deploy"),
	}
	for _, opts := range []Options{{}, {Component: "backend"}} {
		err := validateErr(ValidatePackage(t.Context(), fsys, opts, WithoutConfig))
		require.Error(t, err, opts.Component)
		var problems Errors
		require.True(t, errors.As(err, &problems))
		require.Len(t, problems, 1, "both cases find it: reported once, under the first")
		assert.Equal(t, `test case backend/one: components/backend/deployment.yaml.gotmpl:1 (document 1): metadata.annotations: Deployment d: unknown phase "purposely-wrong": the manifest declares deploy`, problems[0].Error())
	}
	require.NoError(t, validateErr(ValidatePackage(t.Context(), fsys, Options{Component: "frontend"}, WithoutConfig)))

	// Images not locked: found by the package check, not again by each case.
	fsys["components/frontend/manifest.yaml"] = &fstest.MapFile{Data: []byte(strings.NewReplacer("NAME", "frontend", "  phases: [{name: deploy}]\n", "  phases: [{name: deploy}]\n  images: [{name: app, image: 'quay.io/x/app:1'}]\n").Replace(requiredImage))}
	err := validateErr(ValidatePackage(t.Context(), fsys, Options{Component: "frontend"}, WithoutConfig))
	require.Error(t, err)
	var problems Errors
	require.True(t, errors.As(err, &problems))
	require.Len(t, problems, 1, "%v", err)
	assert.ErrorIs(t, err, ErrImagesNotLocked)
}

// validateErr is the error of a ValidatePackage.
func validateErr(_ *Validation, err error) error { return err }

// Every object rendered is checked as the API server would, its problems where render found
// the object: a component's file, a kustomization; kinds without a schema are named, not
// failed. A build (ValidateStructure) checks them too.
func TestValidatePackageChecksObjects(t *testing.T) {
	t.Parallel()
	const phase = "annotations: {package-operator.run/phase: deploy}"
	manifest := func(name, extra string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: " + name + "}\nspec:\n  scopes: [Namespaced]\n  phases: [{name: deploy}]\n" + extra)}
	}
	fsys := fstest.MapFS{
		"manifest.yaml":                             manifest("shop", "  components: {}\n"),
		"widget.yaml":                               {Data: []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, " + phase + "}\n")},
		"components/backend/manifest.yaml":          manifest("backend", ""),
		"components/backend/cm.yaml":                {Data: []byte("# a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, " + phase + "}\ndata: {k: 1}\n")},
		"components/backend/svc/kustomization.yaml": {Data: []byte("resources: [svc.yaml]\n")},
		"components/backend/svc/svc.yaml":           {Data: []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s, " + phase + "}\nspec: {type: Loadbalancer}\n")},
	}
	v, err := ValidatePackage(t.Context(), fsys, Options{}, WithoutConfig)
	require.Error(t, err)
	assert.Equal(t, []string{"example.com/v1 Widget"}, v.NotChecked)
	var problems Errors
	require.True(t, errors.As(err, &problems))
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	want := []string{
		"components/backend/cm.yaml:6 (document 2): data.k: ConfigMap c: must be a string, not 1 (quote it)",
		`components/backend/svc/kustomization.yaml: spec.type: object Service s: "Loadbalancer": must be one of ClusterIP, ExternalName, LoadBalancer, NodePort; did you mean LoadBalancer?`,
	}
	assert.Equal(t, want, got)
	assert.Equal(t, Errors{problems[0], problems[1]}.Error(), ValidateStructure(t.Context(), fsys, Options{}).Error())
}

// A schema problem of an object in a plain file names the line of the offending field, not the
// document's first line; a template's keeps the document's line (as rendered: the template's own
// lines are not known).
func TestValidatePackageReportsTheFieldsLine(t *testing.T) {
	t.Parallel()
	const deploy = `# the operator
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: op
  annotations: {pkgsync.dev/phase: deploy}
spec:
  replica: 3
  selector: {matchLabels: {app: op}}
  template:
    metadata: {labels: {app: op}}
    spec:
      containers:
      - name: op
        image: registry.k8s.io/pause:3.10
        imagePullPolicy: Allways
`
	fsys := fstest.MapFS{
		"manifest.yaml":  {Data: []byte("apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: op}\nspec:\n  phases: [{name: deploy}]\n")},
		"deploy.yaml":    {Data: []byte(deploy)},
		"cm.yaml.gotmpl": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations: {pkgsync.dev/phase: deploy}\ndata:\n  k: {{ 1 }}\n")},
		"ns.yaml":        {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: Bad_NS\n  annotations: {pkgsync.dev/phase: deploy}\n")},
	}
	err := validateErr(ValidatePackage(t.Context(), fsys, Options{}, WithoutConfig))
	var problems Errors
	require.True(t, errors.As(err, &problems), "%v", err)
	lines := map[string]string{}
	for _, p := range problems {
		var e *Error
		require.True(t, errors.As(p, &e), "%v", p)
		lines[e.Field] = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	assert.Equal(t, map[string]string{
		"spec.replica": "deploy.yaml:9",
		"spec.template.spec.containers[0].imagePullPolicy": "deploy.yaml:17",
		"data.k":             "cm.yaml.gotmpl:1",
		"metadata.namespace": "ns.yaml:5",
	}, lines)
}
