package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// writeKeyPair writes cosign.key (encrypted with password) and cosign.pub into dir.
func writeKeyPair(t *testing.T, dir, password string) (keyFile, pubFile string) {
	t.Helper()
	priv, pub, err := signature.GenerateSigningKey([]byte(password))
	require.NoError(t, err)
	keyFile, pubFile = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	require.NoError(t, os.WriteFile(keyFile, priv, 0o600))
	require.NoError(t, os.WriteFile(pubFile, pub, 0o600))
	return keyFile, pubFile
}

// signingSetup is what the signing tests share: a registry, a Docker config path of the test's
// own, two key pairs in cosign's format (password s3cret, set in $COSIGN_PASSWORD, so the test
// must not be parallel) and the directory they are in.
type signingSetup struct {
	reg                          *testenv.Registry
	dir, dockerConfig            string
	key, pub, otherKey, otherPub string
}

func newSigningSetup(t *testing.T) signingSetup {
	t.Helper()
	s := signingSetup{reg: testenv.NewRegistry(t, testenv.RegistryOptions{}), dir: t.TempDir()}
	s.dockerConfig = emptyDockerConfig(t)
	s.key, s.pub = writeKeyPair(t, s.dir, "s3cret")
	otherDir := filepath.Join(s.dir, "other")
	require.NoError(t, os.MkdirAll(otherDir, 0o755))
	s.otherKey, s.otherPub = writeKeyPair(t, otherDir, "s3cret")
	t.Setenv(passwordEnv, "s3cret")
	return s
}

// Not parallel: the key's password comes from the environment.
func TestSignAndVerifyCommands(t *testing.T) {
	s := newSigningSetup(t)
	reg, dockerConfig, key, pub, otherKey, otherPub := s.reg, s.dockerConfig, s.key, s.pub, s.otherKey, s.otherPub

	signed := reg.Host + "/" + testenv.Repository(t, "signed")
	ref := signed + ":v1"
	out, err := runPkgsync(t, "build", writePackage(t), "--tag", ref, "--push", "--sign", "--key", key, "--registry-config", dockerConfig)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	digest := strings.Fields(lines[0])[2]
	assert.True(t, strings.HasPrefix(lines[2], "Signed "+ref+"@"+digest+" (signature "+signed+":"+signature.SignatureTag(digest)+"@sha256:"), lines[2])

	out, err = runPkgsync(t, "verify", ref, "--key", pub, "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.Equal(t, "Verified "+signed+"@"+digest+" with cosign.pub\n", out)
	out, err = runPkgsync(t, "verify", ref, "--key", pub, "--registry-config", dockerConfig, "-o", "json")
	require.NoError(t, err)
	var doc verifyOutput
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, verifyOutput{Image: signed, Digest: digest, Key: "cosign.pub", Signature: doc.Signature, Attestations: []verifiedAttestation{}}, doc)
	assert.Contains(t, doc.Signature, signed+":"+signature.SignatureTag(digest))

	// Another key: exit code 1, the keys named.
	_, err = runPkgsync(t, "verify", ref, "--key", otherPub, "--registry-config", dockerConfig)
	require.ErrorIs(t, err, signature.ErrSignatureInvalid)
	assert.Equal(t, 1, exitCodeOf(err))
	// Any of several keys.
	_, err = runPkgsync(t, "verify", ref, "--key", otherPub, "--key", pub, "--registry-config", dockerConfig)
	require.NoError(t, err)

	// Unsigned: refused; `pkgsync sign` then signs the tag's digest.
	unsigned := signed + ":v2"
	_, err = runPkgsync(t, "push", writePackage(t), unsigned, "--version", "2", "--registry-config", dockerConfig)
	require.NoError(t, err)
	_, err = runPkgsync(t, "verify", unsigned, "--key", otherPub, "--registry-config", dockerConfig)
	require.ErrorIs(t, err, signature.ErrNoSignature)
	out, err = runPkgsync(t, "sign", unsigned, "--key", otherKey, "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "Signed "+unsigned+" (signature "), out)
	_, err = runPkgsync(t, "verify", unsigned, "--key", otherPub, "--registry-config", dockerConfig)
	require.NoError(t, err)

	// A wrong password fails before anything is pushed; --sign needs --push.
	t.Setenv(passwordEnv, "wrong")
	_, err = runPkgsync(t, "build", writePackage(t), "--tag", signed+":v3", "--push", "--sign", "--key", key, "--registry-config", dockerConfig)
	require.ErrorContains(t, err, "is the password right?")
	_, err = runPkgsync(t, "verify", signed+":v3", "--key", pub, "--registry-config", dockerConfig)
	require.ErrorContains(t, err, "tag v3 not found")
	_, err = runPkgsync(t, "build", writePackage(t), "--tag", ref, "--sign", "--key", key)
	assert.Equal(t, 2, exitCodeOf(err))
	_, err = runPkgsync(t, "verify", ref)
	assert.Equal(t, 2, exitCodeOf(err))
}

// exitCodeOf is the exit code main gives err.
func exitCodeOf(err error) int {
	var code exitCodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return code.code
	}
	return 1
}

// sign --key cosign.pub says to use the private key, before asking for a password.
func TestSignRefusesAPublicKey(t *testing.T) {
	t.Parallel()
	_, pub := writeKeyPair(t, t.TempDir(), "s3cret")
	for _, args := range [][]string{
		{"sign", "127.0.0.1:1/team/pkg:v1", "--key", pub},
		{"build", writePackage(t), "--tag", "127.0.0.1:1/team/pkg:v1", "--push", "--sign", "--key", pub},
	} {
		_, stderr, err := runCLI(t, args...)
		require.Error(t, err, "%q", args)
		assert.ErrorContains(t, err, "--key "+pub+" is a public key: sign with the private key (cosign.key)")
		assert.Equal(t, 2, exitCodeOf(err))
		assert.NotContains(t, stderr, "Password", "no password asked for")
	}
}
