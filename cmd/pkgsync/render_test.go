package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCLI runs the root command with args and returns stdout, stderr and the error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetContext(t.Context())
	err := cmd.Execute()
	return stdout.String(), stderr.String(), err
}

func TestRenderCommandExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		args         []string
		wantSections []string
		wantContains []string
	}{{
		name:         "hosted-addon",
		args:         []string{"render", "../../packages-example/hosted-addon", "--namespace", "clusters-demo", "--hosted-cluster", "clusters/demo"},
		wantSections: []string{"# Phase 1: hosted-rbac (class: hosted-cluster)", "# Phase 2: deploy (class: management)", "# Phase 3: configure (class: hosted-cluster)"},
		wantContains: []string{"name: hosted-addon-operator\n  namespace: clusters-demo", "--hosted-cluster=clusters/demo", "hostedCluster: clusters/demo"},
	}, {
		name:         "simple",
		args:         []string{"render", "../../packages-example/simple"},
		wantSections: []string{"# Phase 1: deploy (class: management)"},
		wantContains: []string{"kind: ConfigMap", "kind: Deployment", "app.kubernetes.io/name: simple"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := runCLI(t, tt.args...)
			require.NoError(t, err)
			last := -1
			for _, s := range tt.wantSections {
				i := strings.Index(out, s)
				require.GreaterOrEqual(t, i, 0, "missing %q in:\n%s", s, out)
				assert.Greater(t, i, last, "sections out of order")
				last = i
			}
			for _, s := range tt.wantContains {
				assert.Contains(t, out, s)
			}
			assert.NotContains(t, out, "pkgsync.dev/phase")
		})
	}
}

func TestRenderCommandJSON(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("replicas: 2\n"), 0o600))
	out, _, err := runCLI(t, "render", "../../packages-example/hosted-addon", "-o", "json", "--config", cfg, "--name", "mine")
	require.NoError(t, err)

	var got struct {
		Phases []struct {
			Name    string           `json:"name"`
			Class   string           `json:"class"`
			Objects []map[string]any `json:"objects"`
		} `json:"phases"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Phases, 3)
	assert.Equal(t, "hosted-rbac", got.Phases[0].Name)
	assert.Equal(t, "hosted-cluster", got.Phases[0].Class)
	assert.Equal(t, "", got.Phases[1].Class)
	require.Len(t, got.Phases[1].Objects, 1)
	deploy := got.Phases[1].Objects[0]
	assert.Equal(t, "mine-operator", deploy["metadata"].(map[string]any)["name"])
	assert.EqualValues(t, 2, deploy["spec"].(map[string]any)["replicas"])
}

func TestValidateCommand(t *testing.T) {
	t.Parallel()
	badCfg := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(badCfg, []byte("replicas: 9\nlogLevel: loud\n"), 0o600))

	out, _, err := runCLI(t, "validate", "../../packages-example/hosted-addon")
	require.NoError(t, err)
	assert.Contains(t, out, "valid")

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantErr    string
		wantStderr []string
	}{{
		name:     "invalid configuration",
		args:     []string{"validate", "../../packages-example/hosted-addon", "--config", badCfg},
		wantCode: 1,
		wantStderr: []string{
			`invalid configuration: config.logLevel: Unsupported value: "loud"`,
			"invalid configuration: config.replicas: Invalid value: 9",
		},
	}, {
		name:     "broken package",
		args:     []string{"validate", "../../render/testdata/packages/bad-phases"},
		wantCode: 1,
		wantStderr: []string{
			`objects.yaml:1 (document 1): metadata.annotations: ConfigMap unknown: unknown phase "three"`,
			"objects.yaml:8 (document 2): metadata.annotations: ConfigMap missing: missing phase",
		},
	}, {
		// Nothing listens on port 1: the pull fails fast without leaving the machine.
		name:     "unreachable registry",
		args:     []string{"validate", "127.0.0.1:1/pkg:v1"},
		wantCode: 1,
		wantErr:  "127.0.0.1:1",
	}, {
		name:     "neither a directory nor a reference",
		args:     []string{"validate", "./no-such-dir"},
		wantCode: 2,
		wantErr:  "neither a directory nor a registry reference",
	}, {
		name:     "bad flag",
		args:     []string{"validate", "--nope", "x"},
		wantCode: 2,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, err := runCLI(t, tt.args...)
			require.Error(t, err)
			code := 1
			var ce exitCodeError
			if errors.As(err, &ce) {
				code = ce.code
			}
			assert.Equal(t, tt.wantCode, code)
			assert.ErrorContains(t, err, tt.wantErr)
			for _, s := range tt.wantStderr {
				assert.Contains(t, stderr, s)
			}
		})
	}
}

func TestRenderCommandUsage(t *testing.T) {
	t.Parallel()
	_, _, err := runCLI(t, "render", "../../packages-example/simple", "-o", "table")
	var ce exitCodeError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.code)

	_, _, err = runCLI(t, "render", "../../packages-example/simple/manifest.yaml")
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.code)
	assert.ErrorContains(t, err, "is a file")
}
