package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/internal/version"
)

// One -o vocabulary on every command that prints a result: json and yaml, a table or text by
// default, wide where there is a table; any other format is a wrong command line.
func TestOutputFormats(t *testing.T) {
	t.Parallel()
	lost := nowhereKubeconfig(t, "")
	// key generate refuses to overwrite a key before it asks for a password.
	existing := filepath.Join(t.TempDir(), "existing")
	require.NoError(t, os.WriteFile(existing+".key", []byte("keep"), 0o600))
	tests := []struct {
		args    []string
		formats []string
		// code is the exit code of a format the command takes: it then fails for another
		// reason (no cluster, no registry), not as a wrong command line.
		code int
	}{
		{[]string{"version"}, []string{"text", "json", "yaml"}, 0},
		{[]string{"fleet", "plan", "f", "--kubeconfig", lost}, []string{"table", "json", "yaml", "wide"}, diffExitError},
		{[]string{"fleet", "status", "f", "--kubeconfig", lost}, []string{"table", "json", "yaml"}, 1},
		{[]string{"verify", "127.0.0.1:1/x:v1", "--key", "missing.pub"}, []string{"text", "json", "yaml"}, 1},
		{[]string{"render", "../../packages-example/simple"}, []string{"yaml", "json"}, 0},
		{[]string{"install", "--dry-run=client"}, []string{"text", "json", "yaml"}, 0},
		{[]string{"install", "--kubeconfig", lost, "--image", "registry.example.com/pkgsync:v1"}, []string{"text", "json", "yaml"}, 1},
		{[]string{"uninstall", "--kubeconfig", lost}, []string{"text", "json", "yaml"}, 1},
		{[]string{"lock", writePKOPackage(t, "127.0.0.1:1/team/app:v1")}, []string{"text", "json", "yaml"}, 1},
		{[]string{"key", "generate", "--output-key-prefix", existing}, []string{"text", "json", "yaml"}, 1},
	}
	for _, tt := range tests {
		for _, format := range tt.formats {
			_, stderr, err := runCLI(t, append(tt.args, "-o", format)...)
			assert.Equal(t, tt.code, exitCodeOf(err), "%q -o %s: %v\n%s", tt.args, format, err, stderr)
		}
		_, _, err := runCLI(t, append(tt.args, "-o", "xml")...)
		assert.Equal(t, 2, exitCodeOf(err), "%q -o xml: %v", tt.args, err)
		assert.ErrorContains(t, err, `not "xml"`)
	}
}

// version -o yaml prints the document -o json prints.
func TestVersionYAML(t *testing.T) {
	t.Parallel()
	stdout, _, err := runCLI(t, "version", "-o", "yaml")
	require.NoError(t, err)
	var fromYAML versionInfo
	require.NoError(t, yaml.UnmarshalStrict([]byte(stdout), &fromYAML))
	assert.Equal(t, version.Version, fromYAML.Version)
	jsonOut, _, err := runCLI(t, "version", "-o", "json")
	require.NoError(t, err)
	var fromJSON versionInfo
	require.NoError(t, json.Unmarshal([]byte(jsonOut), &fromJSON))
	assert.Equal(t, fromJSON, fromYAML)
}

// A command that fails prints its error on stderr and no document on stdout: a script that
// reads stdout gets a result or nothing.
func TestOutputDocumentsOnlyOfResults(t *testing.T) {
	t.Parallel()
	lost := nowhereKubeconfig(t, "")
	for _, args := range [][]string{
		{"install", "--kubeconfig", lost, "--image", "registry.example.com/pkgsync:v1"},
		{"uninstall", "--kubeconfig", lost},
		{"lock", writePKOPackage(t, "127.0.0.1:1/team/app:v1")},
	} {
		for _, format := range []string{"json", "yaml"} {
			stdout, _, err := runCLI(t, append(args, "-o", format)...)
			assert.Equal(t, 1, exitCodeOf(err), "%q -o %s: %v", args, format, err)
			assert.Empty(t, stdout, "%q -o %s", args, format)
		}
	}
}
