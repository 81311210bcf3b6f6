package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// runPkgsync runs the root command with args and returns what it printed on stdout.
func runPkgsync(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(t.Context())
	assert.Empty(t, stderr.String(), "quiet on stderr when it is not a terminal")
	return stdout.String(), err
}

// writePackage writes a small package directory.
func writePackage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"manifest.yaml":     "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  phases:\n  - name: deploy\n",
		"deploy/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  annotations: {pkgsync.dev/phase: deploy}\n",
		".git/HEAD":         "ref: refs/heads/main\n",
		"deploy/.notes.txt": "skipped",
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	return dir
}

// files lists the regular files under dir with their content.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		out[name] = string(data)
		return err
	}))
	return out
}

func TestBuildPushPull(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	pkg := writePackage(t)
	tmp := t.TempDir()
	// An empty Docker config: the test must not depend on the machine's credentials.
	dockerConfig := emptyDockerConfig(t)
	archive := filepath.Join(tmp, "demo.tar")
	demo, cp, direct := reg.Host+"/"+testenv.Repository(t, "demo"), reg.Host+"/"+testenv.Repository(t, "copy"), reg.Host+"/"+testenv.Repository(t, "direct")

	out, err := runPkgsync(t, "build", pkg, "--tag", demo+":v1", "--tag", demo+":stable",
		"--version", "1.0.0", "--push", "--archive", archive, "--registry-config", dockerConfig)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	digest := strings.Fields(lines[0])[2]
	assert.Equal(t, "Built demo "+digest, lines[0])
	assert.Equal(t, "Wrote "+archive, lines[1])
	assert.Equal(t, "Pushed "+demo+":v1@"+digest, lines[2])
	assert.Equal(t, "Pushed "+demo+":stable@"+digest, lines[3])

	// Reproducible: building again prints the same digest.
	out, err = runPkgsync(t, "build", pkg, "--version", "1.0.0", "--output-format", "digest")
	require.NoError(t, err)
	assert.Equal(t, digest+"\n", out)

	pulled := filepath.Join(tmp, "pulled")
	out, err = runPkgsync(t, "pull", demo+":stable", "--into", pulled, "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.Equal(t, digest+"\n", out)
	want := files(t, pkg)
	delete(want, ".git/HEAD")
	delete(want, "deploy/.notes.txt")
	assert.Equal(t, want, files(t, pulled))

	// The archive pushes to another repository with the same digest.
	out, err = runPkgsync(t, "push", archive, cp+":v1", "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.Equal(t, digest+"\n", out)
	out, err = runPkgsync(t, "push", pkg, direct+":v1", "--version", "1.0.0", "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.Equal(t, "Pushed "+direct+":v1@"+digest+"\n", out)

	again := filepath.Join(tmp, "again")
	out, err = runPkgsync(t, "pull", cp+":v1@"+digest, "--into", again, "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.Equal(t, "Pulled "+cp+":v1@"+digest+" into "+again+"\n", out)
	assert.Equal(t, want, files(t, again))

	// A pull never writes into a directory that holds something.
	_, err = runPkgsync(t, "pull", demo+":v1", "--into", again, "--registry-config", dockerConfig)
	require.ErrorContains(t, err, "is not empty")
	_, err = runPkgsync(t, "pull", demo+":nope", "--into", filepath.Join(tmp, "none"), "--registry-config", dockerConfig)
	require.ErrorContains(t, err, "tag nope not found in "+demo)
}

func TestRegistryCommandUsageErrors(t *testing.T) {
	t.Parallel()
	pkg := writePackage(t)
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"build"}, wantErr: "one package directory"},
		{args: []string{"build", pkg, "--push"}, wantErr: "--push needs at least one --tag"},
		{args: []string{"build", pkg, "--tag", "no-registry"}, wantErr: "names the registry host"},
		{args: []string{"build", pkg, "--output-format", "yaml"}, wantErr: "--output-format must be"},
		{args: []string{"build", pkg, "--annotation", "novalue"}, wantErr: "want KEY=VALUE"},
		{args: []string{"push", pkg}, wantErr: "a reference"},
		// docker would push :latest without a word, oras refuses; pkgsync refuses.
		{args: []string{"build", pkg, "--tag", "127.0.0.1:1/team/pkg", "--push"}, wantErr: "--tag 127.0.0.1:1/team/pkg names no tag"},
		{args: []string{"build", pkg, "--tag", "127.0.0.1:1/team/pkg", "--archive", filepath.Join(t.TempDir(), "x.tar")}, wantErr: "names no tag"},
		{args: []string{"push", pkg, "127.0.0.1:1/team/pkg"}, wantErr: "127.0.0.1:1/team/pkg names no tag"},
		{args: []string{"pull", "127.0.0.1:1/x:v1"}, wantErr: "pull needs --into DIR"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			cmd := newRootCmd()
			cmd.SetArgs(tt.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.ExecuteContext(t.Context())
			require.ErrorContains(t, err, tt.wantErr)
			var code exitCodeError
			require.True(t, errors.As(err, &code), "a usage error: %v", err)
			assert.Equal(t, 2, code.code)
		})
	}
}

func TestRegistryFlagsTLSAndDockerConfig(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{TLS: true, Htpasswd: true})
	tmp := t.TempDir()
	dockerConfig := filepath.Join(tmp, "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))
	require.NoError(t, os.WriteFile(dockerConfig, []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, auth)), 0o600))
	ref := reg.Host + "/secure:v1"

	out, err := runPkgsync(t, "push", writePackage(t), ref, "--ca-file", reg.CAFile, "--registry-config", dockerConfig, "--output-format", "digest")
	require.NoError(t, err)
	digest := strings.TrimSpace(out)

	out, err = runPkgsync(t, "pull", ref, "--into", filepath.Join(tmp, "a"), "--ca-file", reg.CAFile, "--registry-config", dockerConfig, "--output-format", "digest")
	require.NoError(t, err)
	assert.Equal(t, digest+"\n", out)

	_, err = runPkgsync(t, "pull", ref, "--into", filepath.Join(tmp, "b"), "--registry-config", dockerConfig)
	require.ErrorContains(t, err, "--ca-file")
	_, err = runPkgsync(t, "pull", ref, "--into", filepath.Join(tmp, "c"), "--ca-file", reg.CAFile, "--registry-config", emptyDockerConfig(t))
	require.ErrorContains(t, err, "authentication required for "+reg.Host)
}

func TestBuildValidatesPackage(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	tmp := t.TempDir()
	dockerConfig := emptyDockerConfig(t)
	badConfig := filepath.Join(tmp, "bad.yaml")
	require.NoError(t, os.WriteFile(badConfig, []byte("name: ab\n"), 0o600))
	goodConfig := filepath.Join(tmp, "good.yaml")
	require.NoError(t, os.WriteFile(goodConfig, []byte("name: abc\n"), 0o600))
	// The config package's schema requires name, which a build does not have to give.
	const configPkg = "../../render/testdata/packages/config"

	tests := []struct {
		name    string
		args    []string
		wantErr []string // none: the build succeeds and the image is pushed
	}{{
		name:    "unknown phase",
		args:    []string{"../../render/testdata/packages/bad-phases"},
		wantErr: []string{"validate:", `objects.yaml:1 (document 1): metadata.annotations: ConfigMap unknown: unknown phase "three"`, "missing phase"},
	}, {
		name:    "template syntax",
		args:    []string{"../../render/testdata/packages/bad-template"},
		wantErr: []string{"parse-error.yaml.gotmpl:3: template: missing value for if"},
	}, {
		name: "required configuration missing",
		args: []string{configPkg},
	}, {
		name: "complete configuration",
		args: []string{configPkg, "--config", goodConfig},
	}, {
		name:    "configuration breaking the schema",
		args:    []string{configPkg, "--config", badConfig},
		wantErr: []string{"invalid configuration: config.name"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ref := reg.Host + "/" + testenv.Repository(t, "pkg") + ":v1"
			args := append([]string{"build"}, tt.args...)
			args = append(args, "--tag", ref, "--push", "--registry-config", dockerConfig)
			out, err := runPkgsync(t, args...)
			_, pullErr := runPkgsync(t, "pull", ref, "--into", filepath.Join(t.TempDir(), "out"), "--registry-config", dockerConfig)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Contains(t, out, "Pushed "+ref)
				assert.NoError(t, pullErr)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.ErrorContains(t, err, want)
			}
			assert.Empty(t, out, "nothing built")
			assert.ErrorContains(t, pullErr, "tag v1 not found", "nothing pushed")
		})
	}
}

// A version status and kubectl would not show is refused before anything is built: the
// annotation is what Packages and fleets show beside the digest.
func TestBuildVersionNotShown(t *testing.T) {
	t.Parallel()
	pkg := writePackage(t)
	for _, args := range [][]string{
		{"--version", "1.4.2\n"},
		{"--version", "1.4.2\x1b[2J"},
		{"--version", strings.Repeat("1", 129)},
		{"--annotation", "org.opencontainers.image.version=\u202e2.4.1"},
	} {
		assert.Equal(t, 2, run(append([]string{"build", pkg, "--output-format", "digest"}, args...), io.Discard, io.Discard), "%q", args)
	}
	out, err := runPkgsync(t, "build", pkg, "--version", "1.4.2", "--output-format", "digest")
	require.NoError(t, err)
	assert.NotEmpty(t, out)
}

// build without --push or --archive writes nothing, and says so and how to push or save.
func TestBuildSaysNothingWasWritten(t *testing.T) {
	t.Parallel()
	pkg := writePackage(t)
	stdout, stderr, err := runCLI(t, "build", pkg)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(stdout, "Built "), stdout)
	assert.Contains(t, stderr, "nothing was written: pass --tag REGISTRY/REPOSITORY:TAG --push to push the image, or --archive FILE.tar to save it")

	_, stderr, err = runCLI(t, "build", pkg, "--archive", filepath.Join(t.TempDir(), "p.tar"))
	require.NoError(t, err)
	assert.Empty(t, stderr)
	_, stderr, err = runCLI(t, "build", pkg, "--output-format", "digest")
	require.NoError(t, err)
	assert.Empty(t, stderr, "a script asking for the digest only")
}
