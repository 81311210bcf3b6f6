package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

func TestRenderRegistryReference(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	// An empty Docker config: the test must not depend on the machine's credentials.
	dockerConfig := emptyDockerConfig(t)
	const dir = "../../packages-example/simple"
	simple := reg.Host + "/" + testenv.Repository(t, "simple")
	ref := simple + ":v1"

	out, err := runPkgsync(t, "build", dir, "--tag", ref, "--push", "--output-format", "digest", "--registry-config", dockerConfig)
	require.NoError(t, err)
	digest := strings.TrimSpace(out)

	fromDir, _, err := runCLI(t, "render", dir, "--namespace", "apps")
	require.NoError(t, err)
	require.Contains(t, fromDir, "kind: Deployment")
	for _, r := range []string{ref, simple + "@" + digest} {
		t.Run(r, func(t *testing.T) {
			fromRef, stderr, err := runCLI(t, "render", r, "--namespace", "apps", "--registry-config", dockerConfig)
			require.NoError(t, err, stderr)
			assert.Equal(t, fromDir, fromRef)

			out, _, err := runCLI(t, "validate", r, "--registry-config", dockerConfig)
			require.NoError(t, err)
			assert.Equal(t, r+": valid\n", out)
		})
	}

	_, _, err = runCLI(t, "render", simple+":missing", "--registry-config", dockerConfig)
	require.ErrorContains(t, err, "tag missing not found in "+simple)
}

// A package directory cloned from someone else's repository must not make pkgsync read the
// operator's own files: every command reads it as build packs it, and a symbolic link, to a
// file or a directory, is refused with build's message before anything is rendered.
func TestPackageDirectorySymlinksRefused(t *testing.T) {
	t.Parallel()
	const secret = "operator-secret-8d1f"
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "passwd"), []byte("root:"+secret+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "manifest.yaml"), []byte(
		"apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: web\nspec:\n  phases:\n  - name: deploy\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "cm.yaml"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  annotations: {pkgsync.dev/phase: deploy}\ndata:\n  secret: "+secret+"\n"), 0o600))

	const manifest = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  phases:\n  - name: deploy\n"
	tests := []struct {
		name  string
		files map[string]string
		// links maps a path in the package to the outside path it links to.
		links map[string]string
		// args are passed after the directory to render and validate.
		args []string
		link string // the path build's message names
	}{{
		name: "configMapGenerator file",
		files: map[string]string{
			"manifest.yaml": manifest,
			"deploy/kustomization.yaml": "configMapGenerator:\n- name: stolen\n  files: [passwd]\n" +
				"  options: {annotations: {pkgsync.dev/phase: deploy}}\n",
		},
		links: map[string]string{"deploy/passwd": "passwd"},
		link:  "deploy/passwd",
	}, {
		name: "getFile target",
		files: map[string]string{
			"manifest.yaml": manifest,
			"deploy/cm.yaml.gotmpl": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stolen\n  annotations: {pkgsync.dev/phase: deploy}\n" +
				"data:\n  passwd: {{ getFile \"files/passwd.txt\" | quote }}\n",
		},
		links: map[string]string{"files/passwd.txt": "passwd"},
		link:  "files/passwd.txt",
	}, {
		name: "directory used by configMapGenerator",
		files: map[string]string{
			"manifest.yaml": manifest,
			"deploy/kustomization.yaml": "configMapGenerator:\n- name: stolen\n  files: [etc/passwd]\n" +
				"  options: {annotations: {pkgsync.dev/phase: deploy}}\n",
		},
		links: map[string]string{"deploy/etc": "."},
		link:  "deploy/etc",
	}, {
		name: "component directory",
		files: map[string]string{
			"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  components: {}\n  phases:\n  - name: deploy\n",
		},
		links: map[string]string{"components/web": "."},
		args:  []string{"--component", "web"},
		link:  "components/web",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, body := range tt.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
			}
			for name, target := range tt.links {
				p := filepath.Join(dir, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(outside, target), p))
			}
			want := tt.link + " is a symbolic link: packages hold regular files only, copy the target in its place"

			_, err := runPkgsync(t, "build", dir)
			require.ErrorContains(t, err, want, "build refuses it")
			for _, command := range []string{"render", "validate"} {
				stdout, stderr, err := runCLI(t, append([]string{command, dir}, tt.args...)...)
				assert.NotContains(t, stdout+stderr+fmt.Sprint(err), secret, "%s read a file outside the package", command)
				require.Error(t, err)
				// validate reports it as a problem of its result, on stderr; render in its error.
				assert.Contains(t, fmt.Sprint(err)+stderr, want, "%s refuses it as build does", command)
			}
		})
	}
}
