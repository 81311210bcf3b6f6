package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const hostedAddon = "../../packages-example/hosted-addon"

// writeConfig writes a configuration file for a validate or render command line.
func writeConfig(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

// A configuration key the schema does not declare is a warning (stderr, exit 0), a failure with
// --strict (exit 1), as kubectl's --validate=warn and strict.
func TestValidateWarnsOfDroppedConfigKeys(t *testing.T) {
	t.Parallel()
	typo := writeConfig(t, "replica: 3\n")
	const warning = "config.replica is not in the package's configuration schema and is dropped; did you mean replicas?"

	out, stderr, err := runCLI(t, "validate", hostedAddon, "--config", typo)
	require.NoError(t, err)
	assert.Equal(t, hostedAddon+": valid\n", out)
	assert.Equal(t, "Warning: "+warning+"\n", stderr)

	out, stderr, err = runCLI(t, "validate", hostedAddon, "--config", typo, "--strict")
	assert.Equal(t, 1, exitCodeOf(err))
	assert.Empty(t, out)
	assert.Equal(t, warning+"\n", stderr)
	assert.ErrorContains(t, err, "1 problem(s) found")

	out, stderr, err = runCLI(t, "render", hostedAddon, "--config", typo)
	require.NoError(t, err)
	assert.Contains(t, out, "kind: Deployment")
	assert.Equal(t, "Warning: "+warning+"\n", stderr)
}

// validate -o json|yaml prints the result on stdout, valid or not: the problems with their file,
// line and field, and the warnings.
func TestValidateOutputFormats(t *testing.T) {
	t.Parallel()
	typo := writeConfig(t, "replica: 3\nlogLevel: loud\n")
	type problem struct {
		File     string `json:"file"`
		Document int    `json:"document"`
		Line     int    `json:"line"`
		Field    string `json:"field"`
		Message  string `json:"message"`
	}
	type result struct {
		Package  string    `json:"package"`
		Valid    bool      `json:"valid"`
		Problems []problem `json:"problems"`
		Warnings []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"warnings"`
	}
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			out, stderr, err := runCLI(t, "validate", hostedAddon, "--config", typo, "-o", format)
			assert.Equal(t, 1, exitCodeOf(err))
			assert.Empty(t, stderr, "main prints the error; the command prints nothing else there")
			var got result
			require.NoError(t, yaml.UnmarshalStrict([]byte(out), &got), out)
			assert.Equal(t, hostedAddon, got.Package)
			assert.False(t, got.Valid)
			require.Len(t, got.Problems, 1)
			assert.Equal(t, "config.logLevel", got.Problems[0].Field)
			assert.Contains(t, got.Problems[0].Message, `Unsupported value: "loud"`)
			require.Len(t, got.Warnings, 1)
			assert.Equal(t, "config.replica", got.Warnings[0].Field)

			out, _, err = runCLI(t, "validate", "../../render/testdata/packages/bad-phases", "-o", format)
			assert.Equal(t, 1, exitCodeOf(err))
			got = result{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(out), &got), out)
			require.Len(t, got.Problems, 4)
			assert.Equal(t, problem{File: "objects.yaml", Document: 1, Line: 1, Field: "metadata.annotations",
				Message: `objects.yaml:1 (document 1): metadata.annotations: ConfigMap unknown: unknown phase "three": the manifest declares one, two`}, got.Problems[0])
			assert.NotNil(t, got.Warnings, "an empty list, not null")
		})
	}

	out, _, err := runCLI(t, "validate", hostedAddon, "-o", "json")
	require.NoError(t, err)
	var got result
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.True(t, got.Valid)
	assert.NotNil(t, got.Problems)

	_, _, err = runCLI(t, "validate", hostedAddon, "-o", "table")
	assert.Equal(t, 2, exitCodeOf(err))
}
