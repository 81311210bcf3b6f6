package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// Not parallel: the key's password comes from the environment.
func TestKeyGenerate(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "release")
	t.Setenv(passwordEnv, "s3cret")

	out, err := runPkgsync(t, "key", "generate", "--output-key-prefix", prefix)
	require.NoError(t, err)
	assert.Equal(t, "Private key written to "+prefix+".key\nPublic key written to "+prefix+".pub\n", out)

	for file, perm := range map[string]os.FileMode{prefix + ".key": 0o600, prefix + ".pub": 0o644} {
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, perm, fi.Mode().Perm(), file)
	}
	priv, err := os.ReadFile(prefix + ".key")
	require.NoError(t, err)
	pub, err := os.ReadFile(prefix + ".pub")
	require.NoError(t, err)

	t.Run("the private key opens with the password and matches the public key", func(t *testing.T) {
		key, err := signature.LoadSigningKey(priv, []byte("s3cret"))
		require.NoError(t, err)
		derived, err := key.PublicKeyPEM()
		require.NoError(t, err)
		assert.Equal(t, string(pub), string(derived))
		_, err = signature.LoadSigningKey(priv, []byte("wrong"))
		assert.ErrorContains(t, err, "is the password right?")
	})

	t.Run("an existing key is never overwritten without --force", func(t *testing.T) {
		_, err := runPkgsync(t, "key", "generate", "--output-key-prefix", prefix)
		require.ErrorContains(t, err, prefix+".key exists: not overwriting a key")
		after, err := os.ReadFile(prefix + ".key")
		require.NoError(t, err)
		assert.Equal(t, priv, after)

		// Only the public half there (a half-written pair): still refused, nothing written.
		other := filepath.Join(dir, "half")
		require.NoError(t, os.WriteFile(other+".pub", []byte("keep"), 0o600))
		_, err = runPkgsync(t, "key", "generate", "--output-key-prefix", other)
		require.ErrorContains(t, err, other+".pub exists")
		assert.NoFileExists(t, other+".key")

		_, err = runPkgsync(t, "key", "generate", "--output-key-prefix", prefix, "--force")
		require.NoError(t, err)
		after, err = os.ReadFile(prefix + ".key")
		require.NoError(t, err)
		assert.NotEqual(t, priv, after, "--force writes a new key")
	})

	t.Run("-o json prints the files written as a document", func(t *testing.T) {
		other := filepath.Join(dir, "doc")
		out, err := runPkgsync(t, "key", "generate", "--output-key-prefix", other, "-o", "json")
		require.NoError(t, err)
		var report keyPairReport
		require.NoError(t, json.Unmarshal([]byte(out), &report), out)
		assert.Equal(t, keyPairReport{PrivateKey: other + ".key", PublicKey: other + ".pub"}, report)
		assert.FileExists(t, other+".key")
		assert.FileExists(t, other+".pub")
	})

	t.Run("a symlink planted at the key path is not followed", func(t *testing.T) {
		target := filepath.Join(dir, "elsewhere")
		link := filepath.Join(dir, "planted")
		require.NoError(t, os.Symlink(target, link+".key"))
		_, err := runPkgsync(t, "key", "generate", "--output-key-prefix", link)
		require.ErrorContains(t, err, "exists")
		assert.NoFileExists(t, target)
	})

	t.Run("cosign reads the key pair", func(t *testing.T) {
		binDir, err := testenv.BinDir()
		require.NoError(t, err)
		cosign := filepath.Join(binDir, "cosign")
		if _, err := os.Stat(cosign); err != nil {
			t.Skipf("interoperability with the cosign CLI not tested: %s is missing; `make cosign` builds it", cosign)
		}
		fresh := filepath.Join(dir, "fresh")
		_, err = runPkgsync(t, "key", "generate", "--output-key-prefix", fresh)
		require.NoError(t, err)
		cmd := exec.CommandContext(t.Context(), cosign, "public-key", "--key", fresh+".key")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "COSIGN_PASSWORD=s3cret")
		got, err := cmd.Output()
		require.NoError(t, err)
		want, err := os.ReadFile(fresh + ".pub")
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	})
}

func TestKeyGenerateWithoutPassword(t *testing.T) {
	// No $COSIGN_PASSWORD and no terminal (tests run with stdin not a terminal): a clear error,
	// no files.
	prefix := filepath.Join(t.TempDir(), "k")
	t.Setenv(passwordEnv, "")
	require.NoError(t, os.Unsetenv(passwordEnv))
	_, err := runPkgsync(t, "key", "generate", "--output-key-prefix", prefix)
	require.ErrorContains(t, err, "set $COSIGN_PASSWORD")
	assert.NoFileExists(t, prefix+".key")
}
