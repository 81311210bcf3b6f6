package main

import (
	"encoding/json"
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
