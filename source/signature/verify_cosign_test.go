package signature

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// cosignBinary returns the cosign CLI built by `make cosign`, or skips the test.
func cosignBinary(t *testing.T) string {
	t.Helper()
	dir, err := testenv.BinDir()
	require.NoError(t, err)
	path := filepath.Join(dir, "cosign")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("interoperability with the cosign CLI not tested: %s is missing; `make cosign` builds it from the module proxy", path)
	}
	return path
}

// runCosign runs the cosign CLI offline: no Docker credentials of the machine, no TUF cache in
// the home directory, the key's password from the environment.
func runCosign(t *testing.T, cosign, password string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), cosign, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+home, "COSIGN_PASSWORD="+password, "SIGSTORE_NO_CACHE=true")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pkgsync's signatures verify with `cosign verify`, cosign's with Verify, and the key files of
// either work in the other.
func TestCosignInterop(t *testing.T) {
	t.Parallel()
	cosign := cosignBinary(t)
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	ctx := t.Context()
	dir := t.TempDir()

	t.Run("cosign verifies what pkgsync signs, with a key pkgsync made", func(t *testing.T) {
		img, ref := pushPackage(t, c, reg.Host, testenv.Repository(t, "by-pkgsync"), nil)
		priv, pub, err := GenerateSigningKey([]byte("pw"))
		require.NoError(t, err)
		pubFile := filepath.Join(dir, "pkgsync.pub")
		require.NoError(t, os.WriteFile(pubFile, pub, 0o600))
		key, err := LoadSigningKey(priv, []byte("pw"))
		require.NoError(t, err)
		_, err = Sign(ctx, c, ref, key, nil)
		require.NoError(t, err)

		out, err := runCosign(t, cosign, "", "verify", "--key", pubFile, "--insecure-ignore-tlog=true",
			"--allow-http-registry", ref.WithDigest(img.Digest).String())
		require.NoError(t, err, out)
		assert.Contains(t, out, img.Digest)

		// And cosign refuses it with another key, so the check above means something.
		_, other, err := GenerateSigningKey([]byte("pw"))
		require.NoError(t, err)
		otherFile := filepath.Join(dir, "other.pub")
		require.NoError(t, os.WriteFile(otherFile, other, 0o600))
		out, err = runCosign(t, cosign, "", "verify", "--key", otherFile, "--insecure-ignore-tlog=true",
			"--allow-http-registry", ref.WithDigest(img.Digest).String())
		require.Error(t, err, out)
	})

	t.Run("pkgsync verifies what cosign signs, with a key cosign made", func(t *testing.T) {
		img, ref := pushPackage(t, c, reg.Host, testenv.Repository(t, "by-cosign"), nil)
		keyDir := t.TempDir()
		cmd := exec.CommandContext(ctx, cosign, "generate-key-pair")
		cmd.Dir = keyDir
		cmd.Env = append(os.Environ(), "HOME="+keyDir, "COSIGN_PASSWORD=secret")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		out2, err := runCosign(t, cosign, "secret", "sign", "--key", filepath.Join(keyDir, "cosign.key"), "--tlog-upload=false",
			"--allow-http-registry", "--yes", ref.WithDigest(img.Digest).String())
		require.NoError(t, err, out2)

		pub, err := os.ReadFile(filepath.Join(keyDir, "cosign.pub"))
		require.NoError(t, err)
		v, err := Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"cosign.pub": pub}), nil)
		require.NoError(t, err)
		assert.Equal(t, img.Digest, v.Digest)

		// cosign's private key signs in pkgsync too, next to cosign's own signature.
		priv, err := os.ReadFile(filepath.Join(keyDir, "cosign.key"))
		require.NoError(t, err)
		key, err := LoadSigningKey(priv, []byte("secret"))
		require.NoError(t, err)
		_, err = Sign(ctx, c, ref, key, nil)
		require.NoError(t, err)
		m, err := readSignatureManifest(ctx, c, repositoryOf(t, c, ref), source.Reference{Registry: ref.Registry, Repository: ref.Repository, Tag: SignatureTag(img.Digest)})
		require.NoError(t, err)
		assert.Len(t, m.Layers, 1, "the same key over the same payload replaces cosign's signature")
	})
}
