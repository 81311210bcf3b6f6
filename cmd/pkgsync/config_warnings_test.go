package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fleets "pkgsync.dev/pkgsync/internal/fleet"
	"pkgsync.dev/pkgsync/render"
)

// Every command that renders says, as validate and render do, that a configuration key the
// schema does not declare is dropped: diff (also when it cannot reach the cluster), apply, and
// test for a case's configuration.
func TestRenderingCommandsWarnOfDroppedConfigKeys(t *testing.T) {
	t.Parallel()
	typo := writeConfig(t, "replica: 3\n")
	const warning = "Warning: config.replica is not in the package's configuration schema and is dropped; did you mean replicas?\n"
	lost := nowhereKubeconfig(t, "")

	_, stderr, err := runCLI(t, "diff", hostedAddon, "--config", typo, "--kubeconfig", lost)
	assert.Equal(t, diffExitError, exitCodeOf(err), "%v", err)
	assert.True(t, strings.HasPrefix(stderr, warning), stderr)

	_, stderr, err = runCLI(t, "apply", hostedAddon, "--config", typo, "--dry-run=client", "-n", "clusters-demo")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(stderr, warning), stderr)

	// A render that fails still says so: the dropped key is often why a required one is missing.
	required := writeObjectsPackage(t, map[string]string{"deploy/cm.yaml.gotmpl": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, " + inDeploy + "}\n" +
		"data: {replicas: \"{{ .config.replicas }}\"}\n"})
	manifest := filepath.Join(required, "manifest.yaml")
	data, err := os.ReadFile(manifest)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(manifest, append(data, []byte("  config:\n    openAPIV3Schema:\n      type: object\n      required: [replicas]\n"+
		"      properties: {replicas: {type: integer}}\n")...), 0o600))
	_, stderr, err = runCLI(t, "diff", required, "--config", typo, "--kubeconfig", lost)
	assert.Equal(t, diffExitError, exitCodeOf(err))
	assert.Contains(t, stderr, warning)
	assert.ErrorContains(t, err, "replicas")

	dir := writeTestedPackage(t, strings.Replace(testedManifest, "      config: {replicas: 3}\n", "      config: {replica: 3}\n", 1))
	stdout, stderr, err := runCLI(t, "test", dir)
	require.NoError(t, err, stderr)
	assert.Equal(t, "written defaults\nwritten hosted.three-replicas\n", stdout)
	assert.Equal(t, "Warning: hosted.three-replicas: config.replica is not in the package's configuration schema and is dropped; did you mean replicas?\n", stderr)
	fixture, err := os.ReadFile(filepath.Join(dir, ".test-fixtures", "hosted.three-replicas", "cm.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(fixture), `replicas: "1"`, "the key is dropped, as Package Operator drops it")
}

// fleet plan prints each warning of the members' renders once, with the members it is about.
func TestFleetPlanWarnings(t *testing.T) {
	t.Parallel()
	dropped := render.Warning{Field: "config.replica", Message: "config.replica is not in the package's configuration schema and is dropped; did you mean replicas?"}
	other := render.Warning{Field: "config.x", Message: "config.x is not in the package's configuration schema and is dropped"}
	var members []fleets.PreflightMember
	for i, ns := range []string{"clusters-a", "clusters-b", "clusters-c", "clusters-d", "clusters-e", "clusters-f", "clusters-g"} {
		m := fleets.PreflightMember{Namespace: ns, Warnings: []render.Warning{dropped}}
		if i == 1 {
			m.Warnings = append(m.Warnings, other)
			m.Reason = "RenderFailed" // a member that fails warns too
		}
		members = append(members, m)
	}
	members = append(members, fleets.PreflightMember{Namespace: "clusters-clean"})
	var stderr bytes.Buffer
	printMemberWarnings(&stderr, members)
	assert.Equal(t, "Warning: members clusters-a, clusters-b, clusters-c, clusters-d, clusters-e and 2 more: "+dropped.Message+"\n"+
		"Warning: member clusters-b: "+other.Message+"\n", stderr.String())
}
