package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// The destinations -o/--output named before it meant a format everywhere: the new flag works
// quietly, the old spelling works with a warning on stderr (stdout keeps only the data), and
// both at once are a usage error that writes nothing.
func TestRenamedOutputFlags(t *testing.T) {
	t.Parallel()
	pkg := writePackage(t)
	const (
		archiveWarning = "Flag --output has been deprecated, use --archive (-o and --output name output formats)\n"
		intoWarning    = "Flag --output has been deprecated, use --into (-o and --output name output formats)\n"
	)
	digest, err := runPkgsync(t, "build", pkg, "--output-format", "digest")
	require.NoError(t, err)

	tests := []struct {
		name string
		// args build their command line from the test's directory.
		args       func(dir string) []string
		wantStdout string
		wantStderr string
		wantErr    string // a usage error
		wantFiles  []string
	}{{
		name:       "build --archive",
		args:       func(dir string) []string { return []string{"build", pkg, "--archive", filepath.Join(dir, "a.tar")} },
		wantStdout: digest,
		wantFiles:  []string{"a.tar"},
	}, {
		name:       "build --output, the old spelling",
		args:       func(dir string) []string { return []string{"build", pkg, "--output", filepath.Join(dir, "a.tar")} },
		wantStdout: digest,
		wantStderr: archiveWarning,
		wantFiles:  []string{"a.tar"},
	}, {
		name: "build with both spellings",
		args: func(dir string) []string {
			return []string{"build", pkg, "--archive", filepath.Join(dir, "a.tar"), "--output", filepath.Join(dir, "b.tar")}
		},
		wantStderr: archiveWarning,
		wantErr:    "--output is the old spelling of --archive: give one of them",
	}, {
		name: "pull with both spellings",
		args: func(dir string) []string {
			return []string{"pull", "127.0.0.1:1/x:v1", "--into", filepath.Join(dir, "a"), "--output", filepath.Join(dir, "b")}
		},
		wantStderr: intoWarning,
		wantErr:    "--output is the old spelling of --into: give one of them",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append(tt.args(dir), "--output-format", "digest")
			stdout, stderr, err := runCLI(t, args...)
			assert.Equal(t, tt.wantStderr, stderr)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				if strings.Contains(tt.wantErr, "old spelling") {
					assert.Equal(t, 2, exitCodeOf(err), "a usage error")
				}
				assert.Empty(t, stdout)
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				assert.Empty(t, entries, "nothing written")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantStdout, stdout)
			for _, f := range tt.wantFiles {
				assert.FileExists(t, filepath.Join(dir, f))
			}
		})
	}
}

// pull's old spelling, --output DIR, still pulls into DIR.
func TestPullOldOutputSpelling(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	dockerConfig := emptyDockerConfig(t)
	ref := reg.Host + "/" + testenv.Repository(t, "demo") + ":v1"
	digest, err := runPkgsync(t, "push", writePackage(t), ref, "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)

	dir := filepath.Join(t.TempDir(), "pulled")
	stdout, stderr, err := runCLI(t, "pull", ref, "--output", dir, "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.Equal(t, digest, stdout)
	assert.Equal(t, "Flag --output has been deprecated, use --into (-o and --output name output formats)\n", stderr)
	assert.FileExists(t, filepath.Join(dir, "manifest.yaml"))
}

// Help lists the new spellings only.
func TestRenamedFlagsHidden(t *testing.T) {
	t.Parallel()
	for cmd, flag := range map[string]string{"build": "--archive", "pull": "--into"} {
		stdout, _, err := runCLI(t, cmd, "--help")
		require.NoError(t, err)
		assert.Contains(t, stdout, flag, cmd)
		assert.NotContains(t, stdout, "--output ", cmd)
		assert.NotContains(t, stdout, "-o,", cmd)
	}
}
