package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// The controller image is verified before install prints or applies anything, and the
// Deployment runs the digest that was verified. Not parallel: the key's password comes from
// the environment.
func TestInstallVerifyKey(t *testing.T) {
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	tmp := t.TempDir()
	dockerConfig := filepath.Join(tmp, "config.json")
	key, pub := writeKeyPair(t, tmp, "s3cret")
	otherDir := filepath.Join(tmp, "other")
	require.NoError(t, os.MkdirAll(otherDir, 0o755))
	_, otherPub := writeKeyPair(t, otherDir, "s3cret")
	t.Setenv(passwordEnv, "s3cret")

	// Any image stands in for the controller's: only its signature is checked.
	repo := reg.Host + "/" + testenv.Repository(t, "platform/pkgsync")
	unsignedRepo := reg.Host + "/" + testenv.Repository(t, "platform/unsigned")
	image := repo + ":v1"
	out, err := runPkgsync(t, "build", writePackage(t), "--tag", image, "--push", "--sign", "--key", key, "--registry-config", dockerConfig)
	require.NoError(t, err)
	digest := strings.Fields(strings.Split(out, "\n")[0])[2]
	install := func(args ...string) (string, string, error) {
		return runCLI(t, append([]string{"install", "--registry-config", dockerConfig}, args...)...)
	}

	t.Run("a signed image is installed by the digest verified", func(t *testing.T) {
		stdout, stderr, err := install("--export", "--image", image, "--verify-key", otherPub, "--verify-key", pub)
		require.NoError(t, err)
		assert.Contains(t, stderr, "verified "+image+" with cosign.pub")
		objs := decodeYAMLStream(t, stdout)
		deploy := objs[len(objs)-1]
		containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
		assert.Equal(t, repo+"@"+digest, containers[0].(map[string]any)["image"])
	})

	refused := []struct {
		name  string
		image string
		keys  []string
		want  error
	}{
		{"signed by another key", image, []string{otherPub}, source.ErrSignatureInvalid},
		{"never signed", unsignedRepo + ":v1", []string{pub}, source.ErrNoSignature},
		// The tag now names other content than was signed.
		{"changed since it was signed", repo + ":v1-tampered", []string{pub}, source.ErrNoSignature},
	}
	_, err = runPkgsync(t, "push", writePackage(t), unsignedRepo+":v1", "--version", "1", "--registry-config", dockerConfig)
	require.NoError(t, err)
	_, err = runPkgsync(t, "build", writePackage(t), "--tag", repo+":v1-tampered", "--push", "--sign", "--key", key, "--registry-config", dockerConfig)
	require.NoError(t, err)
	_, err = runPkgsync(t, "push", writePackage(t), repo+":v1-tampered", "--version", "2", "--registry-config", dockerConfig)
	require.NoError(t, err)
	for _, tt := range refused {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			var args []string
			for _, k := range tt.keys {
				args = append(args, "--verify-key", k)
			}
			for _, mode := range [][]string{{"--export"}, {"--dry-run=client"}} {
				stdout, _, err := install(append(append([]string{"--image", tt.image}, args...), mode...)...)
				require.ErrorIs(t, err, tt.want)
				assert.ErrorContains(t, err, "the controller image is not installed")
				assert.Empty(t, stdout, "nothing printed or applied")
			}
		})
	}

	t.Run("a missing key file is a clear error", func(t *testing.T) {
		_, _, err := install("--export", "--image", image, "--verify-key", filepath.Join(tmp, "missing.pub"))
		require.ErrorContains(t, err, "read --verify-key")
	})
}
