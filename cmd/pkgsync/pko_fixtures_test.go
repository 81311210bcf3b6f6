package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Package Operator fixtures of our own (testdata/pko, see its README.md), each run through
// pkgsync validate, render and test as a user would.
const pkoFixtures = "testdata/pko"

// golden compares got with testdata/pko/golden/NAME, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	assertGolden(t, filepath.Join(pkoFixtures, "golden", name), got)
}

// TestPackageOperatorFixturesValid runs the package using every supported rule: validate
// accepts it, test finds every case equal to its fixture, and render with the flags matching a
// case's context prints exactly that case's fixture.
func TestPackageOperatorFixturesValid(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(pkoFixtures, "valid", "shop")

	stdout, stderr, err := runCLI(t, "validate", dir, "--kubernetes-version", "v1.36.3")
	require.NoError(t, err, stderr)
	assert.Equal(t, dir+": valid\n", stdout)

	stdout, stderr, err = runCLI(t, "test", dir)
	require.NoError(t, err, stderr)
	assert.Equal(t, "ok defaults\nok hosted-ha\n", stdout, "every case equals its committed fixture")
	assert.Empty(t, stderr, "test.kubeconform runs, for the release pkgsync knows: nothing to note")

	// Without --name the Package is named like the manifest (shop), as the defaults case. The
	// render has the same objects as the case's fixtures (.test-fixtures/defaults/), with the
	// locked image digests where the fixtures have Package Operator's static test image.
	stdout, stderr, err = runCLI(t, "render", dir, "--namespace", "shop-ns", "--kubernetes-version", "v1.36.3")
	require.NoError(t, err, stderr)
	golden(t, "shop-defaults.yaml", stdout)

	// The component, selected as a Package's spec.component selects it.
	stdout, stderr, err = runCLI(t, "validate", dir, "--component", "backend")
	require.NoError(t, err, stderr)
	assert.Equal(t, dir+": valid\n", stdout)
	stdout, stderr, err = runCLI(t, "render", dir, "--component", "backend", "--namespace", "shop-ns")
	require.NoError(t, err, stderr)
	golden(t, "shop-backend.yaml", stdout)
}

// TestPackageOperatorFixturesInvalid runs each package that breaks rules: validate reports
// every problem with its file, object and field, render refuses the package, and test fails
// its cases. What they print is compared with golden files.
func TestPackageOperatorFixturesInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// flags are given to validate and render.
		flags []string
		// validates is set when validate accepts the package (only test finds the problem).
		validates bool
	}{
		{name: "filter"},
		{name: "condition-annotation"},
		{name: "condition-map"},
		{name: "cel-template"},
		{name: "images-unlocked"},
		{name: "images-stale"},
		{name: "components"},
		{name: "components-select", flags: []string{"--component", "nested"}},
		{name: "components-select", flags: []string{"--component", "missing"}},
		{name: "constraints"},
		{name: "constraints-violated", flags: []string{"--kubernetes-version", "v1.36.3"}},
		{name: "unsupported"},
		{name: "phases"},
		{name: "config", flags: []string{"--config", filepath.Join(pkoFixtures, "invalid", "config", ".bad-config.yaml")}},
		{name: "test-cases"},
	}
	for _, tt := range tests {
		name := tt.name
		if len(tt.flags) > 0 && tt.flags[0] == "--component" {
			name += "-component-" + tt.flags[1]
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(pkoFixtures, "invalid", tt.name)
			normalize := func(s string) string { return strings.ReplaceAll(s, dir, "DIR") }

			stdout, stderr, err := runCLI(t, append([]string{"validate", dir}, tt.flags...)...)
			if tt.validates {
				require.NoError(t, err, stderr)
			} else {
				require.Error(t, err)
				assert.Empty(t, stdout)
				golden(t, "invalid-"+name+".validate.txt", normalize(stderr+"error: "+err.Error()+"\n"))
			}

			_, _, err = runCLI(t, append([]string{"render", dir}, tt.flags...)...)
			if tt.validates {
				require.NoError(t, err)
			} else {
				require.Error(t, err, "render refuses what validate refuses")
			}

			if len(tt.flags) > 0 && tt.flags[0] == "--component" {
				return // test runs the root's cases
			}
			stdout, stderr, err = runCLI(t, "test", dir)
			require.Error(t, err)
			golden(t, "invalid-"+name+".test.txt", normalize(stdout+stderr+"error: "+err.Error()+"\n"))
			_, statErr := os.Stat(filepath.Join(dir, ".test-fixtures"))
			assert.True(t, os.IsNotExist(statErr), "a failing case writes no fixture")
		})
	}
}

// validate checks a package as Package Operator's "kubectl package validate" does: without
// --config, values the schema requires may be absent and every test case renders with its own
// configuration (a case that breaks the package fails it, under its name); with --config, that
// configuration is checked too.
func TestValidateRendersTestCases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600))
	}
	write("manifest.yaml", `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: p}
spec:
  scopes: [Namespaced]
  phases: [{name: deploy}]
  config: {openAPIV3Schema: {type: object, required: [phase], properties: {phase: {type: string}}}}
test:
  template:
  - name: good
    context: {config: {phase: deploy}}
`)
	write("cm.yaml.gotmpl", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations: {package-operator.run/phase: '{{ .config.phase }}'}\n")
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(empty, []byte("{}\n"), 0o600))

	stdout, stderr, err := runCLI(t, "validate", dir)
	require.NoError(t, err, stderr)
	assert.Equal(t, dir+": valid\n", stdout)

	_, stderr, err = runCLI(t, "validate", dir, "--config", empty)
	require.Error(t, err)
	assert.Equal(t, "invalid configuration: config.phase: Required value\n", stderr)

	write("manifest.yaml", strings.Replace(readFile(t, filepath.Join(dir, "manifest.yaml")), "context: {config: {phase: deploy}}", "context: {config: {phase: later}}", 1))
	_, stderr, err = runCLI(t, "validate", dir)
	require.Error(t, err)
	assert.Equal(t, `test case good: cm.yaml.gotmpl:1 (document 1): metadata.annotations: ConfigMap cm: unknown phase "later": the manifest declares deploy`+"\n", stderr)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(data)
}
