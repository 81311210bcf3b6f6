package render

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownFormatTested is a package in pkgsync's own format with Package Operator's test section:
// two cases, images without a lock file.
const ownFormatTested = `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata: {name: tested}
spec:
  phases: [{name: deploy}]
  images: [{name: app, image: quay.io/example/app:v1}]
  config:
    openAPIV3Schema:
      type: object
      properties:
        replicas: {type: integer, default: 1}
test:
  template:
  - name: defaults
    context:
      package: {metadata: {name: t, namespace: ns-a}}
  - name: hosted.three-replicas
    context:
      package: {metadata: {name: t, namespace: clusters-demo, labels: {tier: x}}}
      config: {replicas: 3}
      environment:
        kubernetes: {version: v1.36.3}
        hyperShift:
          hostedCluster:
            metadata: {name: demo, namespace: clusters, labels: {team: a}}
            hostedClusterNamespace: clusters-demo
  kubeconform:
    kubernetesVersion: v1.36.0
`

const ownFormatTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .package.metadata.name }}
  namespace: {{ .package.metadata.namespace }}
  annotations: {pkgsync.dev/phase: deploy}
data:
  replicas: "{{ .config.replicas }}"
  image: {{ .images.app }}
  team: {{ if hasKey .environment "hyperShift" }}{{ index .environment.hyperShift.hostedCluster.metadata.labels "team" }}{{ else }}none{{ end }}
`

// pkgsync's own manifest has Package Operator's test section with the same meaning: its cases
// are read with their contexts and rendered as Package Operator's are (images as TestImage),
// and its format needs no lock file for spec.images there either.
func TestOwnFormatTemplateTests(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"manifest.yaml":   {Data: []byte(ownFormatTested)},
		"cm.yaml.gotmpl":  {Data: []byte(ownFormatTemplate)},
		"plain/more.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n  annotations: {pkgsync.dev/phase: deploy}\n")},
	}
	all, err := ReadAllTemplateTests(fsys)
	require.NoError(t, err)
	require.Len(t, all, 1)
	tests := all[0]
	assert.Equal(t, ".", tests.Dir)
	require.Len(t, tests.Cases, 2)
	assert.Equal(t, "defaults", tests.Cases[0].Name)
	assert.Equal(t, Options{Name: "t", Namespace: "ns-a"}, tests.Cases[0].Options)
	three := tests.Cases[1]
	assert.Equal(t, "hosted.three-replicas", three.Name)
	assert.JSONEq(t, `{"replicas":3}`, string(three.Options.Config))
	assert.Equal(t, map[string]string{"tier": "x"}, three.Options.Labels)
	assert.Equal(t, "v1.36.3", three.Options.Environment.KubernetesVersion)
	require.NotNil(t, three.Options.Environment.HostedCluster)
	assert.Equal(t, "clusters-demo", three.Options.Environment.HostedCluster.HostedClusterNamespace)
	assert.True(t, three.CheckObjects, "test.kubeconform is carried: the cases' objects are checked")

	want := map[string]string{
		"defaults":              "  name: t\n  namespace: ns-a\n  annotations: {pkgsync.dev/phase: deploy}\ndata:\n  replicas: \"1\"\n  image: " + TestImage + "\n  team: none\n",
		"hosted.three-replicas": "  name: t\n  namespace: clusters-demo\n  annotations: {pkgsync.dev/phase: deploy}\ndata:\n  replicas: \"3\"\n  image: " + TestImage + "\n  team: a\n",
	}
	for _, tc := range tests.Cases {
		res, err := RenderTestCase(t.Context(), fsys, tc)
		require.NoError(t, err, tc.Name)
		require.Len(t, res.Files, 2, tc.Name)
		assert.Equal(t, File{Path: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n" + want[tc.Name]}, res.Files[0], tc.Name)
		assert.Equal(t, "plain/more.yaml", res.Files[1].Path)
	}
	_, err = ValidatePackage(t.Context(), fsys, Options{}, WithoutConfig)
	require.NoError(t, err)

	// validate renders the cases: one the templates cannot render is reported under its name.
	fsys["cm.yaml.gotmpl"] = &fstest.MapFile{Data: []byte(strings.Replace(ownFormatTemplate, "deploy}", "{{ if hasKey .package.metadata.labels \"tier\" }}deploy{{ else }}nowhere{{ end }}}", 1))}
	_, err = ValidatePackage(t.Context(), fsys, Options{}, WithoutConfig)
	require.Error(t, err)
	var problems Errors
	require.True(t, errors.As(err, &problems), "%v", err)
	assert.Contains(t, err.Error(), `test case defaults: cm.yaml.gotmpl:1 (document 1): metadata.annotations: ConfigMap ns-a/t: unknown phase "nowhere"`)
	assert.NotContains(t, err.Error(), "test case hosted.three-replicas", "its labels have tier")
}

// The test section of pkgsync's own format is checked as Package Operator's is: case names are
// fixture directories (unique: validate says so too, not only test), a case's configuration must pass the schema, kubeconform needs a version.
func TestOwnFormatTestSectionChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, from, to, want string
	}{
		{"case name outside the fixtures", "name: defaults", "name: ../escaped", `manifest.yaml: test.template[0].name: "../escaped": a case name is a directory name in .test-fixtures`},
		{"duplicate case", "name: hosted.three-replicas", "name: defaults", `manifest.yaml: test.template[1].name: duplicate case "defaults"`},
		{"configuration the schema refuses", "config: {replicas: 3}", "config: {replicas: three}", "manifest.yaml: test.template[1].context.config.replicas: "},
		{"kubeconform without a version", "kubernetesVersion: v1.36.0", "schemaLocations: [default]", "manifest.yaml: test.kubeconform.kubernetesVersion: required"},
		{"unknown field", "  kubeconform:", "  kubeconfrom: {}\n  kubeconform:", `unknown field "kubeconfrom"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, ownFormatTested, tt.from)
			fsys := fstest.MapFS{
				"manifest.yaml":  {Data: []byte(strings.Replace(ownFormatTested, tt.from, tt.to, 1))},
				"cm.yaml.gotmpl": {Data: []byte(ownFormatTemplate)},
			}
			_, err := ReadAllTemplateTests(fsys)
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
			_, err = ValidatePackage(t.Context(), fsys, Options{}, WithoutConfig)
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
