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
	assert.Empty(t, stderr, "test.kubeconform runs, for the release pkgsync knows: nothing to note")
	// Package Operator's layout: one directory per case, one file per template, named
	// without .gotmpl, holding the template's output as it is.
	fixture, err := os.ReadFile(filepath.Join(dir, ".test-fixtures", "hosted.three-replicas", "cm.yaml"))
	require.NoError(t, err)
	assert.Equal(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: t
  namespace: clusters-demo
  annotations: {package-operator.run/phase: deploy}
data:
  replicas: "3"
  team: a
`, string(fixture))
	_, err = os.Stat(filepath.Join(dir, ".test-fixtures", "defaults", "cm.yaml"))
	require.NoError(t, err)

	stdout, _, err = runCLI(t, "test", dir)
	require.NoError(t, err)
	assert.Equal(t, "ok defaults\nok hosted.three-replicas\n", stdout)

	// The package changes: the case fails with a diff, until --update accepts it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(strings.Replace(testedTemplate, "\ndata:", "\ndata:\n  added: yes-it-is", 1)), 0o644))
	before := readDir(t, filepath.Join(dir, ".test-fixtures"))
	_, stderr, err = runCLI(t, "test", dir)
	require.Error(t, err)
	assert.Contains(t, stderr, "FAIL defaults: the render differs from")
	assert.Contains(t, stderr, "cm.yaml: differs from its fixture:\n--- FIXTURE/cm.yaml\n+++ ACTUAL/cm.yaml\n")
	assert.Contains(t, stderr, "+  added: yes-it-is")
	assert.ErrorContains(t, err, "2 of 2 case(s) failed")
	assert.Equal(t, before, readDir(t, filepath.Join(dir, ".test-fixtures")), "a failing comparison leaves the fixtures as they are")

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

// A fixture file the render no longer produces, and a rendered file the fixtures lack, each
// fail the case; --update makes the fixture directory the render again.
func TestTestCommandFixtureFilesOnOneSide(t *testing.T) {
	t.Parallel()
	dir := writeTestedPackage(t, testedManifest)
	_, _, err := runCLI(t, "test", dir)
	require.NoError(t, err)

	stale := filepath.Join(dir, ".test-fixtures", "defaults", "old", "gone.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(stale), 0o755))
	require.NoError(t, os.WriteFile(stale, []byte("kind: Gone\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "more.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n  annotations: {package-operator.run/phase: deploy}\n"), 0o644))

	_, stderr, err := runCLI(t, "test", dir)
	require.Error(t, err)
	assert.Contains(t, stderr, "more.yaml: rendered, but not in the fixtures")
	assert.Contains(t, stderr, "old/gone.yaml: in the fixtures, but the render has no objects there")
	_, err = os.Stat(stale)
	require.NoError(t, err, "compared, not touched")

	stdout, _, err := runCLI(t, "test", dir, "--update")
	require.NoError(t, err)
	assert.Equal(t, "updated defaults\nupdated hosted.three-replicas\n", stdout)
	_, err = os.Stat(stale)
	assert.True(t, os.IsNotExist(err), "--update drops what the render no longer produces")
	_, _, err = runCLI(t, "test", dir)
	require.NoError(t, err)
}

// Documents a condition leaves out are not in the fixture; a file left without any is no
// fixture at all. Images are Package Operator's static test image, lock file or not.
func TestTestCommandFiltersAndImages(t *testing.T) {
	t.Parallel()
	manifest := strings.Replace(testedManifest, "  phases: [{name: deploy}]\n", "  phases: [{name: deploy}]\n  images: [{name: app, image: quay.io/example/app:v1}]\n", 1)
	dir := writeTestedPackage(t, manifest)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.lock.yaml"), []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifestLock\nmetadata: {}\nspec:\n  images:\n  - {name: app, image: quay.io/example/app:v1, digest: sha256:"+strings.Repeat("1", 64)+"}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(strings.Replace(testedTemplate, "\ndata:", "\ndata:\n  image: {{ .images.app }}", 1)+`---
apiVersion: v1
kind: ConfigMap
metadata:
  name: only-three
  annotations:
    package-operator.run/phase: deploy
    package-operator.run/condition: config.replicas == 3
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "never.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: never\n  annotations:\n    package-operator.run/phase: deploy\n    package-operator.run/condition: \"false\"\n"), 0o644))
	_, stderr, err := runCLI(t, "test", dir)
	require.NoError(t, err, stderr)

	defaults, err := os.ReadFile(filepath.Join(dir, ".test-fixtures", "defaults", "cm.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(defaults), "image: registry.package-operator.run/static-image")
	assert.NotContains(t, string(defaults), "only-three")
	assert.NotContains(t, string(defaults), "---")
	three, err := os.ReadFile(filepath.Join(dir, ".test-fixtures", "hosted.three-replicas", "cm.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(three), "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: only-three\n")
	_, err = os.Stat(filepath.Join(dir, ".test-fixtures", "defaults", "never.yaml"))
	assert.True(t, os.IsNotExist(err))
}

// readDir maps every file under dir to its content.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	}))
	return out
}

// In a multi-component package every component's cases run, with fixtures next to the
// component's manifest; --component runs one component's.
func TestTestCommandComponents(t *testing.T) {
	t.Parallel()
	dir := writeTestedPackage(t, strings.Replace(testedManifest, "  phases: [{name: deploy}]\n", "  phases: [{name: deploy}]\n  components: {}\n", 1))
	comp := filepath.Join(dir, "components", "backend")
	require.NoError(t, os.MkdirAll(comp, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(comp, "manifest.yaml"), []byte(strings.Replace(testedManifest, "name: tested", "name: backend", 1)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(comp, "cm.yaml.gotmpl"), []byte(testedTemplate), 0o644))

	stdout, stderr, err := runCLI(t, "test", dir)
	require.NoError(t, err, stderr)
	assert.Equal(t, "written defaults\nwritten hosted.three-replicas\nwritten backend/defaults\nwritten backend/hosted.three-replicas\n", stdout)
	_, err = os.Stat(filepath.Join(comp, ".test-fixtures", "defaults", "cm.yaml"))
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(comp, "cm.yaml.gotmpl"), []byte(strings.Replace(testedTemplate, "\ndata:", "\ndata:\n  backend: changed", 1)), 0o644))
	stdout, stderr, err = runCLI(t, "test", dir, "--component", "backend")
	require.Error(t, err)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "FAIL backend/defaults: the render differs from "+filepath.Join(comp, ".test-fixtures", "defaults"))
	stdout, _, err = runCLI(t, "test", dir)
	require.Error(t, err)
	assert.Equal(t, "ok defaults\nok hosted.three-replicas\n", stdout, "the root's cases still pass")
}

// Fixtures are part of the package directory: a link there must neither show the operator's
// files in a diff nor make pkgsync write or remove files outside the package.
func TestTestCommandFixtureSymlinksRefused(t *testing.T) {
	t.Parallel()
	const secret = "operator-secret-3c7a"
	const want = "is a symbolic link: packages hold regular files only, copy the target in its place"

	t.Run("fixture file linked outside", func(t *testing.T) {
		t.Parallel()
		outside := filepath.Join(t.TempDir(), "passwd")
		require.NoError(t, os.WriteFile(outside, []byte("root:"+secret+"\n"), 0o600))
		dir := writeTestedPackage(t, testedManifest)
		_, stderr, err := runCLI(t, "test", dir)
		require.NoError(t, err, stderr)
		fixture := filepath.Join(dir, ".test-fixtures", "defaults", "cm.yaml")
		require.NoError(t, os.Remove(fixture))
		require.NoError(t, os.Symlink(outside, fixture))

		stdout, stderr, err := runCLI(t, "test", dir)
		require.Error(t, err)
		assert.NotContains(t, stdout+stderr+err.Error(), secret, "the diff shows a file outside the package")
		assert.Contains(t, stderr, "cm.yaml "+want)
	})

	t.Run("fixture directory linked outside", func(t *testing.T) {
		t.Parallel()
		outside := t.TempDir()
		victim := filepath.Join(outside, "defaults", "keep")
		require.NoError(t, os.MkdirAll(filepath.Dir(victim), 0o755))
		require.NoError(t, os.WriteFile(victim, []byte(secret), 0o600))
		dir := writeTestedPackage(t, testedManifest)
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, ".test-fixtures")))

		for _, args := range [][]string{{"test", dir}, {"test", dir, "--update"}} {
			_, _, err := runCLI(t, args...)
			require.Error(t, err, "%v", args)
			data, err := os.ReadFile(victim)
			require.NoError(t, err, "%v removed a file outside the package", args)
			assert.Equal(t, secret, string(data))
			_, err = os.Stat(filepath.Join(outside, "hosted.three-replicas"))
			assert.ErrorIs(t, err, os.ErrNotExist, "%v wrote outside the package", args)
		}
	})
}

// test.kubeconform runs: a case whose objects the API server would refuse fails, naming the
// problem, and what is run otherwise than written (another release, schema locations) is said.
func TestTestCommandKubeconform(t *testing.T) {
	t.Parallel()
	manifest := strings.Replace(testedManifest, "    kubernetesVersion: v1.36.0\n",
		"    kubernetesVersion: v1.30.0\n    schemaLocations: ['https://example.com/{{ .ResourceKind }}.json']\n", 1)
	dir := writeTestedPackage(t, manifest)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(strings.Replace(testedTemplate, "\ndata:\n", "\ndata:\n  number: 1\n", 1)), 0o644))

	_, stderr, err := runCLI(t, "test", dir)
	require.Error(t, err)
	assert.Contains(t, stderr, "FAIL defaults: cm.yaml.gotmpl:1 (document 1): data.number: ConfigMap ns-a/t: must be a string, not 1 (quote it)")
	assert.Contains(t, stderr, "test.kubeconform.kubernetesVersion: Kubernetes 1.30's schemas are not available offline (pkgsync embeds 1.36's only): "+
		"objects are checked against Kubernetes 1.36's schemas, with the rules of 1.30 pkgsync knows: a Service's metadata.name is a DNS-1035 label")
	assert.Contains(t, stderr, "test.kubeconform.schemaLocations[0]: https://example.com/{{ .ResourceKind }}.json: not used: pkgsync test fetches no schemas (it runs offline)")

	// Without test.kubeconform, as in Package Operator, the objects are not checked.
	dir = writeTestedPackage(t, strings.Replace(testedManifest, "  kubeconform:\n    kubernetesVersion: v1.36.0\n", "", 1))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(strings.Replace(testedTemplate, "\ndata:\n", "\ndata:\n  number: 1\n", 1)), 0o644))
	_, stderr, err = runCLI(t, "test", dir)
	require.NoError(t, err, stderr)
}

// test.kubeconform.kubernetesVersion is honoured where the schemas pkgsync embeds can: the rules
// of that release pkgsync knows are applied (a Service's name was a DNS-1035 label before 1.36);
// what cannot be used offline is said, location by location, and per case the kinds there was no
// schema for.
func TestTestCommandKubeconformRelease(t *testing.T) {
	t.Parallel()
	service := "apiVersion: v1\nkind: Service\nmetadata:\n  name: 1-api\n  annotations: {package-operator.run/phase: deploy}\nspec:\n  ports: [{port: 80}]\n"
	widget := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  annotations: {package-operator.run/phase: deploy}\n"
	pkg := func(kubeconform string) string {
		dir := writeTestedPackage(t, strings.Replace(testedManifest, "  kubeconform:\n    kubernetesVersion: v1.36.0\n", "  kubeconform:\n"+kubeconform, 1))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte(service), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "widget.yaml"), []byte(widget), 0o644))
		return dir
	}

	stdout, stderr, err := runCLI(t, "test", pkg("    kubernetesVersion: v1.36.0\n"))
	require.NoError(t, err, stderr)
	assert.Equal(t, "written defaults\nwritten hosted.three-replicas\n", stdout)
	assert.Equal(t, "defaults: 1 kind not checked against a schema: example.com/v1 Widget (no CustomResourceDefinition for it in the package; test.kubeconform.schemaLocations are not read offline)\n"+
		"hosted.three-replicas: 1 kind not checked against a schema: example.com/v1 Widget (no CustomResourceDefinition for it in the package; test.kubeconform.schemaLocations are not read offline)\n", stderr)

	_, stderr, err = runCLI(t, "test", pkg("    kubernetesVersion: v1.30.2\n    schemaLocations: [default, 'https://raw.githubusercontent.com/datreeio/CRDs-catalog/main/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json', ./schemas]\n"))
	require.Error(t, err)
	assert.Equal(t, 1, exitCodeOf(err))
	assert.Contains(t, stderr, `FAIL defaults: svc.yaml:4 (document 1): metadata.name: Service 1-api: "1-api": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character`)
	assert.Contains(t, stderr, "test.kubeconform.schemaLocations[0]: default: Kubernetes' own schemas: the ones pkgsync embeds are used instead, offline\n")
	assert.Contains(t, stderr, "test.kubeconform.schemaLocations[1]: https://raw.githubusercontent.com/datreeio/CRDs-catalog/main/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json: not used: pkgsync test fetches no schemas")
	assert.Contains(t, stderr, "test.kubeconform.schemaLocations[2]: ./schemas: not used: pkgsync checks custom resources against CustomResourceDefinitions, not kubeconform's JSON schema files")

	_, stderr, err = runCLI(t, "test", pkg("    kubernetesVersion: master\n"))
	require.NoError(t, err, stderr)
	assert.Contains(t, stderr, `test.kubeconform.kubernetesVersion: "master" is not a Kubernetes release pkgsync knows (MAJOR.MINOR[.PATCH]): objects are checked offline against Kubernetes 1.36's schemas`)

	// validate renders the cases as test does, for the same release.
	_, stderr, err = runCLI(t, "validate", pkg("    kubernetesVersion: v1.30.2\n"))
	assert.Equal(t, 1, exitCodeOf(err), stderr)
	assert.Contains(t, stderr, `test case defaults: svc.yaml:4 (document 1): metadata.name: Service 1-api: "1-api": a DNS-1035 label`)
}

// ownTestedManifest is testedManifest in pkgsync's own format, with an image and no lock file:
// the same test section, the same meaning.
const ownTestedManifest = `apiVersion: pkgsync.dev/v1alpha1
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
      package: {metadata: {name: t, namespace: clusters-demo}}
      config: {replicas: 3}
      environment:
        kubernetes: {version: v1.36.3}
        hyperShift:
          hostedCluster:
            metadata: {name: demo, namespace: clusters, labels: {team: a}}
            hostedClusterNamespace: clusters-demo
`

// pkgsync test runs the test section of pkgsync's own manifest as it runs Package Operator's:
// fixtures written, then compared (a changed template fails with a diff, exit 1), --update
// accepts the change; validate renders the cases too. No lock file is needed.
func TestTestCommandOwnFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	template := strings.NewReplacer("package-operator.run/phase", "pkgsync.dev/phase", "\ndata:\n", "\ndata:\n  image: {{ .images.app }}\n").Replace(testedTemplate)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(ownTestedManifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(template), 0o644))

	stdout, stderr, err := runCLI(t, "test", dir)
	require.NoError(t, err, stderr)
	assert.Equal(t, "written defaults\nwritten hosted.three-replicas\n", stdout)
	fixture, err := os.ReadFile(filepath.Join(dir, ".test-fixtures", "hosted.three-replicas", "cm.yaml"))
	require.NoError(t, err)
	assert.Equal(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: t
  namespace: clusters-demo
  annotations: {pkgsync.dev/phase: deploy}
data:
  image: registry.package-operator.run/static-image
  replicas: "3"
  team: a
`, string(fixture))
	stdout, _, err = runCLI(t, "test", dir)
	require.NoError(t, err)
	assert.Equal(t, "ok defaults\nok hosted.three-replicas\n", stdout)
	_, stderr, err = runCLI(t, "validate", dir)
	require.NoError(t, err, stderr)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(strings.Replace(template, "data:", "data:\n  added: yes-it-is", 1)), 0o644))
	before := readDir(t, filepath.Join(dir, ".test-fixtures"))
	_, stderr, err = runCLI(t, "test", dir)
	require.Error(t, err)
	var exit exitCodeError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.code)
	assert.Contains(t, stderr, "FAIL defaults: the render differs from")
	assert.Contains(t, stderr, "cm.yaml: differs from its fixture:\n--- FIXTURE/cm.yaml\n+++ ACTUAL/cm.yaml\n")
	assert.Contains(t, stderr, "+  added: yes-it-is")
	assert.ErrorContains(t, err, "2 of 2 case(s) failed")
	assert.Equal(t, before, readDir(t, filepath.Join(dir, ".test-fixtures")))

	stdout, _, err = runCLI(t, "test", dir, "--update")
	require.NoError(t, err)
	assert.Equal(t, "updated defaults\nupdated hosted.three-replicas\n", stdout)
	stdout, _, err = runCLI(t, "test", dir)
	require.NoError(t, err)
	assert.Equal(t, "ok defaults\nok hosted.three-replicas\n", stdout)

	// validate renders every case: one its templates cannot render makes the package invalid.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(strings.Replace(template, "pkgsync.dev/phase: deploy", `pkgsync.dev/phase: '{{ if eq .config.replicas 3 }}nowhere{{ else }}deploy{{ end }}'`, 1)), 0o644))
	_, stderr, err = runCLI(t, "validate", dir)
	require.Error(t, err)
	assert.Contains(t, stderr, "test case hosted.three-replicas:")
}
