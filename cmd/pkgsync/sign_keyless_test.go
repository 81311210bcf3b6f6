package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/internal/intoto"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	keylessIssuer   = "https://token.ci.example"
	keylessIdentity = "https://ci.example/pkgsync/.github/workflows/release.yml@refs/tags/v1"
)

// keylessSetup is a registry, a Fulcio and a Rekor over HTTP, their trusted root in a file and
// an identity token for keylessIdentity in another.
type keylessSetup struct {
	reg                               *testenv.Registry
	services                          *testenv.SigstoreServices
	dockerConfig, rootFile, tokenFile string
}

func newKeylessSetup(t *testing.T) keylessSetup {
	t.Helper()
	dir := t.TempDir()
	s := keylessSetup{reg: testenv.NewRegistry(t, testenv.RegistryOptions{}), services: testenv.NewSigstoreServices(t)}
	s.dockerConfig = emptyDockerConfig(t)
	trusted, err := s.services.TrustedRoot()
	require.NoError(t, err)
	s.rootFile = filepath.Join(dir, "trusted_root.json")
	require.NoError(t, os.WriteFile(s.rootFile, trusted, 0o600))
	s.tokenFile = writeToken(t, testenv.IdentityToken(keylessIssuer, keylessIdentity))
	return s
}

func writeToken(t *testing.T, token string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(f, []byte(token+"\n"), 0o600))
	return f
}

// sign runs pkgsync sign --keyless against the setup's services.
func (s keylessSetup) sign(t *testing.T, ref, tokenFile string, args ...string) (string, error) {
	t.Helper()
	return runPkgsync(t, append([]string{"sign", ref, "--keyless", "--fulcio-url", s.services.FulcioURL, "--rekor-url", s.services.RekorURL,
		"--identity-token-file", tokenFile, "--trusted-root", s.rootFile, "--registry-config", s.dockerConfig}, args...)...)
}

// pkgsync sign --keyless gets a certificate from Fulcio, logs in Rekor and pushes bundles that
// pkgsync verify, pkgsync install and a Package's keyless policy accept for the token's
// identity only.
func TestSignKeyless(t *testing.T) {
	t.Parallel()
	s := newKeylessSetup(t)
	repo := s.reg.Host + "/" + testenv.Repository(t, "platform/pkgsync")
	release := repo + ":v1"
	digest := pushStandIn(t, release, s.dockerConfig, "1")
	sbom, prov := releaseFiles(t, repo, digest)

	out, err := s.sign(t, release, s.tokenFile, "--provenance", prov, "--sbom", sbom)
	require.NoError(t, err)
	assert.Contains(t, out, "Signed "+repo+"@"+digest+" as "+keylessIdentity+" (signature "+repo+"@sha256:")
	assert.Contains(t, out, "Attested "+repo+"@"+digest+" as "+keylessIdentity)
	assert.Equal(t, int64(1), s.services.Certificates(), "one certificate for the signature and the attestations")
	assert.Equal(t, int64(3), s.services.Entries(), "the signature and two attestations logged")

	verify := func(identity string) (string, error) {
		return runPkgsync(t, "verify", release, "--identity", identity, "--oidc-issuer", `https://token\.ci\.example`,
			"--trusted-root", s.rootFile, "--registry-config", s.dockerConfig)
	}
	out, err = verify(`https://ci\.example/pkgsync/\.github/workflows/release\.yml@refs/tags/v.*`)
	require.NoError(t, err)
	assert.Equal(t, "Verified "+repo+"@"+digest+" with issuer "+keylessIssuer+" subject "+keylessIdentity+"\n", out)
	_, err = verify(`https://ci\.example/other/.*`)
	require.ErrorIs(t, err, signature.ErrSignatureInvalid)
	assert.Equal(t, 1, exitCodeOf(err))

	stdout, stderr, err := runCLI(t, "install", "--export", "--registry-config", s.dockerConfig, "--image", release,
		"--verify-identity", `https://ci\.example/pkgsync/.*`, "--verify-oidc-issuer", `https://token\.ci\.example`, "--trusted-root", s.rootFile)
	require.NoError(t, err)
	assert.Contains(t, stderr, "installing "+repo+"@"+digest)
	assert.NotEmpty(t, stdout)

	// Signed with a token for another identity: it verifies as that identity, not as the release's.
	other := repo + ":v2"
	otherDigest := pushStandIn(t, other, s.dockerConfig, "2")
	out, err = s.sign(t, other, writeToken(t, testenv.IdentityToken(keylessIssuer, "https://ci.example/fork/.github/workflows/release.yml@refs/heads/main")))
	require.NoError(t, err)
	assert.Contains(t, out, "Signed "+repo+"@"+otherDigest+" as https://ci.example/fork/")
	_, err = runPkgsync(t, "verify", other, "--identity", `https://ci\.example/pkgsync/.*`, "--oidc-issuer", `.*`,
		"--trusted-root", s.rootFile, "--registry-config", s.dockerConfig)
	require.ErrorIs(t, err, signature.ErrSignatureInvalid)
	assert.ErrorContains(t, err, "no identity matches")
}

// A Fulcio that certifies another key than the one that asked is refused before anything is
// logged or pushed.
func TestSignKeylessRefusesCertificateForAnotherKey(t *testing.T) {
	t.Parallel()
	s := newKeylessSetup(t)
	ref := s.reg.Host + "/" + testenv.Repository(t, "platform/pkgsync") + ":v1"
	pushStandIn(t, ref, s.dockerConfig, "1")
	s.services.CertifyAnotherKey(true)

	for _, trustedRoot := range []bool{true, false} {
		args := []string{"sign", ref, "--keyless", "--fulcio-url", s.services.FulcioURL, "--rekor-url", s.services.RekorURL,
			"--identity-token-file", s.tokenFile, "--registry-config", s.dockerConfig}
		if trustedRoot {
			args = append(args, "--trusted-root", s.rootFile)
		}
		_, err := runPkgsync(t, args...)
		require.ErrorIs(t, err, signature.ErrCertificateKey, "trusted root %v", trustedRoot)
	}
	assert.Equal(t, int64(2), s.services.Certificates())
	assert.Zero(t, s.services.Entries(), "nothing logged")
	_, err := runPkgsync(t, "verify", ref, "--identity", `.*`, "--oidc-issuer", `.*`, "--trusted-root", s.rootFile, "--registry-config", s.dockerConfig)
	require.ErrorIs(t, err, signature.ErrNoSignature, "nothing pushed")
}

// Not parallel: $SIGSTORE_ID_TOKEN is cleared.
func TestSignKeylessUsage(t *testing.T) {
	for name, args := range map[string][]string{
		"key and keyless":        {"--keyless", "--key", "cosign.key", "--identity-token", "x"},
		"a service without it":   {"--fulcio-url", "https://fulcio.example"},
		"no token":               {"--keyless"},
		"token and token file":   {"--keyless", "--identity-token", "x", "--identity-token-file", "f"},
		"verify with key and id": nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(identityTokenEnv, "")
			cmd := append([]string{"sign", "localhost:5000/x:v1"}, args...)
			if args == nil {
				cmd = []string{"verify", "localhost:5000/x:v1", "--key", "cosign.pub", "--identity", ".*", "--oidc-issuer", ".*", "--trusted-root", "r"}
			}
			_, err := runPkgsync(t, cmd...)
			assert.Equal(t, 2, exitCodeOf(err), "%v", err)
		})
	}
}

// cosign verify and cosign verify-attestation accept what pkgsync sign --keyless makes, given
// the test's trusted root, for the token's identity only. The test Fulcio embeds no signed
// certificate timestamp (its CT log key is the virtual Sigstore's own), so cosign is told to
// ignore SCTs; everything else (the chain, the Rekor entry and its proof, the identity) it checks.
func TestSignKeylessCosign(t *testing.T) {
	t.Parallel()
	bin, err := testenv.BinDir()
	require.NoError(t, err)
	cosign := filepath.Join(bin, "cosign")
	if _, err := os.Stat(cosign); err != nil {
		t.Skipf("interoperability with the cosign CLI not tested: %s is missing; `make cosign` builds it from the module proxy", cosign)
	}
	s := newKeylessSetup(t)
	repo := s.reg.Host + "/" + testenv.Repository(t, "platform/pkgsync")
	digest := pushStandIn(t, repo+":v1", s.dockerConfig, "1")
	sbom, prov := releaseFiles(t, repo, digest)
	_, err = s.sign(t, repo+":v1", s.tokenFile, "--provenance", prov, "--sbom", sbom)
	require.NoError(t, err)
	pinned := repo + "@" + digest
	run := func(args ...string) (string, error) {
		home := t.TempDir()
		cmd := exec.CommandContext(t.Context(), cosign, args...)
		cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+home, "SIGSTORE_NO_CACHE=true", "TUF_ROOT="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	flags := func(identity string) []string {
		return []string{"--new-bundle-format", "--trusted-root", s.rootFile, "--insecure-ignore-sct", "--allow-http-registry",
			"--certificate-identity", identity, "--certificate-oidc-issuer", keylessIssuer}
	}
	out, err := run(append(append([]string{"verify"}, flags(keylessIdentity)...), pinned)...)
	require.NoError(t, err, short(out))
	out, err = run(append(append([]string{"verify"}, flags("https://ci.example/other")...), pinned)...)
	require.Error(t, err, "cosign refuses another identity: %s", short(out))
	for _, tt := range []struct{ cosignType, predicateType string }{
		{"slsaprovenance1", intoto.ProvenancePredicateType},
		{"spdxjson", intoto.SPDXPredicateType},
	} {
		out, err := run(append(append([]string{"verify-attestation", "--type", tt.cosignType}, flags(keylessIdentity)...), pinned)...)
		require.NoError(t, err, short(out))
		assert.True(t, strings.Contains(out, tt.predicateType) || verifiedPredicateType(t, out) == tt.predicateType, short(out))
	}
}
