package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testedManifest = `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: tested}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
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
      package: {metadata: {name: t, namespace: clusters-demo}}
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

const testedTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .package.metadata.name }}
  namespace: {{ .package.metadata.namespace }}
  annotations: {package-operator.run/phase: deploy}
data:
  replicas: "{{ .config.replicas }}"
  team: {{ if hasKey .environment "hyperShift" }}{{ index .environment.hyperShift.hostedCluster.metadata.labels "team" }}{{ else }}none{{ end }}
`

func writeTestedPackage(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(testedTemplate), 0o644))
	return dir
}

func TestTestCommandFixtures(t *testing.T) {
	t.Parallel()
	dir := writeTestedPackage(t, testedManifest)

	// First run: fixtures are missing and written.
	stdout, stderr, err := runCLI(t, "test", dir)
	require.NoError(t, err, stderr)
	assert.Equal(t, "written defaults\nwritten hosted.three-replicas\n", stdout)
	assert.Contains(t, stderr, "test.kubeconform: skipped", "a kubeconform section is reported, never silently ignored")
	fixture, err := os.ReadFile(filepath.Join(dir, ".test-fixtures", "hosted.three-replicas.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(fixture), `replicas: "3"`)
	assert.Contains(t, string(fixture), "team: a")

	stdout, _, err = runCLI(t, "test", dir)
	require.NoError(t, err)
	assert.Equal(t, "ok defaults\nok hosted.three-replicas\n", stdout)

	// The package changes: the case fails with a diff, until --update accepts it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(strings.Replace(testedTemplate, "data:", "data:\n  added: yes-it-is", 1)), 0o644))
	_, stderr, err = runCLI(t, "test", dir)
	require.Error(t, err)
	assert.Contains(t, stderr, "FAIL defaults: the render differs from")
	assert.Contains(t, stderr, "+  added: yes-it-is")
	assert.ErrorContains(t, err, "2 of 2 case(s) failed")

	stdout, _, err = runCLI(t, "test", dir, "--update")
	require.NoError(t, err)
	assert.Equal(t, "updated defaults\nupdated hosted.three-replicas\n", stdout)
	_, _, err = runCLI(t, "test", dir)
	require.NoError(t, err)
}

// Case names come from the package: one must not write outside .test-fixtures.
func TestTestCommandRefusesCaseNamesOutsideFixtures(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"../../escaped", "/tmp/abs", "a/b", "..", ""} {
		manifest := strings.Replace(testedManifest, "name: defaults", "name: "+`"`+name+`"`, 1)
		dir := writeTestedPackage(t, manifest)
		_, _, err := runCLI(t, "test", dir)
		require.Error(t, err, name)
		assert.ErrorContains(t, err, "test.template[0].name", name)
		entries, err := os.ReadDir(filepath.Dir(dir))
		require.NoError(t, err)
		for _, e := range entries {
			assert.NotEqual(t, "escaped", e.Name(), "nothing written outside the package")
		}
		_, err = os.Stat(filepath.Join(dir, ".test-fixtures"))
		assert.True(t, os.IsNotExist(err), "no fixture written for a refused manifest")
	}
}
