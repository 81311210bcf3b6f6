package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// The controller image is verified before install prints or applies anything, and the
// Deployment runs the digest that was verified. Not parallel: the key's password comes from
// the environment.
func TestInstallVerifyKey(t *testing.T) {
	s := newSigningSetup(t)
	reg, tmp, dockerConfig, key, pub, otherPub := s.reg, s.dir, s.dockerConfig, s.key, s.pub, s.otherPub

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
		{"signed by another key", image, []string{otherPub}, signature.ErrSignatureInvalid},
		{"never signed", unsignedRepo + ":v1", []string{pub}, signature.ErrNoSignature},
		// The tag now names other content than was signed.
		{"changed since it was signed", repo + ":v1-tampered", []string{pub}, signature.ErrNoSignature},
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

// Keyless: the controller image is installed only when a certificate of the trusted root's CA,
// issued to the identity by the issuer, signed the digest; and by that digest.
func TestInstallVerifyIdentity(t *testing.T) {
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	tmp := t.TempDir()
	dockerConfig := emptyDockerConfig(t)
	sigstore, err := testenv.NewSigstore()
	require.NoError(t, err)
	trusted, err := sigstore.TrustedRoot()
	require.NoError(t, err)
	rootFile := filepath.Join(tmp, "trusted_root.json")
	require.NoError(t, os.WriteFile(rootFile, trusted, 0o600))
	other, err := testenv.NewSigstore()
	require.NoError(t, err)
	otherTrusted, err := other.TrustedRoot()
	require.NoError(t, err)
	otherRoot := filepath.Join(tmp, "other_root.json")
	require.NoError(t, os.WriteFile(otherRoot, otherTrusted, 0o600))

	const issuer, identity = "https://issuer.example", "https://ci.example/release@refs/tags/v1"
	repository := testenv.Repository(t, "platform/pkgsync")
	image := reg.Host + "/" + repository + ":v1"
	out, err := runPkgsync(t, "build", writePackage(t), "--tag", image, "--push", "--registry-config", dockerConfig)
	require.NoError(t, err)
	digest := strings.Fields(strings.Split(out, "\n")[0])[2]
	bundle, err := sigstore.SignImage(reg.Host+"/"+repository, digest, signature.SignPredicateType, identity, issuer)
	require.NoError(t, err)
	_, err = testenv.AttachBundle(t.Context(), reg.Host, repository, digest, bundle, signature.SignPredicateType)
	require.NoError(t, err)

	install := func(args ...string) (string, string, error) {
		return runCLI(t, append([]string{"install", "--export", "--registry-config", dockerConfig, "--image", image}, args...)...)
	}
	stdout, stderr, err := install("--verify-identity", `https://ci\.example/release@refs/tags/v.*`, "--verify-oidc-issuer", `https://issuer\.example`, "--trusted-root", rootFile)
	require.NoError(t, err)
	assert.Contains(t, stderr, "verified "+image+" with issuer "+issuer+" subject "+identity)
	objs := decodeYAMLStream(t, stdout)
	containers, _, _ := unstructured.NestedSlice(objs[len(objs)-1].Object, "spec", "template", "spec", "containers")
	assert.Equal(t, reg.Host+"/"+repository+"@"+digest, containers[0].(map[string]any)["image"])

	for name, args := range map[string][]string{
		"another identity":       {"--verify-identity", `https://ci\.example/other@.*`, "--verify-oidc-issuer", `https://issuer\.example`, "--trusted-root", rootFile},
		"another issuer":         {"--verify-identity", `.*`, "--verify-oidc-issuer", `https://other\.example`, "--trusted-root", rootFile},
		"another trusted root":   {"--verify-identity", `.*`, "--verify-oidc-issuer", `.*`, "--trusted-root", otherRoot},
		"a key, not an identity": {"--verify-key", writeOnlyPub(t, tmp)},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			stdout, _, err := install(args...)
			require.Error(t, err)
			assert.ErrorContains(t, err, "the controller image is not installed")
			assert.Empty(t, stdout)
		})
	}
	for name, args := range map[string][]string{
		"identity without a trusted root": {"--verify-identity", `.*`, "--verify-oidc-issuer", `.*`},
		"identity and key together":       {"--verify-identity", `.*`, "--verify-oidc-issuer", `.*`, "--trusted-root", rootFile, "--verify-key", rootFile},
	} {
		t.Run("usage: "+name, func(t *testing.T) {
			_, _, err := install(args...)
			assert.Equal(t, 2, exitCodeOf(err), "%v", err)
		})
	}
}

// writeOnlyPub writes a public key nobody signed with.
func writeOnlyPub(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(dir, "unused")
	require.NoError(t, os.MkdirAll(d, 0o755))
	_, pub := writeKeyPair(t, d, "pw")
	return pub
}
