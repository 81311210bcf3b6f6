package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/internal/image"
	"pkgsync.dev/pkgsync/internal/intoto"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// releaseFiles writes an SBOM and a provenance statement about digest, as make image does, made
// from this test binary's Go build information (it stands in for the controller binary).
func releaseFiles(t *testing.T, subject, digest string) (sbomFile, provFile string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	opts := image.Options{
		Binaries: []image.Binary{{OS: "linux", Arch: "amd64", Path: exe}},
		Version:  "v1.2.3-test", Revision: "0123456789abcdef0123456789abcdef01234567",
		Source: "https://github.com/pkgsync/pkgsync", Created: time.Unix(1700000000, 0),
	}
	sbom, err := image.SBOM(opts)
	require.NoError(t, err)
	prov, err := image.ProvenanceStatement(opts, image.Provenance{Subject: subject, Digest: digest, Command: []string{"pkgsync", "image"}})
	require.NoError(t, err)
	dir := t.TempDir()
	sbomFile, provFile = filepath.Join(dir, "pkgsync.spdx.json"), filepath.Join(dir, "provenance.intoto.json")
	require.NoError(t, os.WriteFile(sbomFile, sbom, 0o600))
	require.NoError(t, os.WriteFile(provFile, prov, 0o600))
	return sbomFile, provFile
}

// pushStandIn pushes a package image, which stands in for the controller image (only its
// digest counts here), and returns its digest.
func pushStandIn(t *testing.T, ref, dockerConfig, version string) string {
	t.Helper()
	out, err := runPkgsync(t, "build", writePackage(t), "--tag", ref, "--push", "--version", version, "--registry-config", dockerConfig)
	require.NoError(t, err)
	return strings.Fields(strings.Split(out, "\n")[0])[2]
}

// The release's signature, provenance and SBOM attestations, made by pkgsync sign, verify with
// pkgsync verify; a tampered image, a wrong key and a missing attachment are each refused. Not
// parallel: the key's password comes from the environment.
func TestReleaseAttestations(t *testing.T) {
	s := newSigningSetup(t)
	reg, dockerConfig, key, pub, otherKey, otherPub := s.reg, s.dockerConfig, s.key, s.pub, s.otherKey, s.otherPub

	repo := reg.Host + "/" + testenv.Repository(t, "platform/pkgsync")
	release := repo + ":v1"
	digest := pushStandIn(t, release, dockerConfig, "1")
	sbom, prov := releaseFiles(t, repo, digest)
	out, err := runPkgsync(t, "sign", release, "--key", key, "--provenance", prov, "--sbom", sbom, "--registry-config", dockerConfig)
	require.NoError(t, err)
	assert.Contains(t, out, "Signed "+release+"@"+digest)
	assert.Contains(t, out, "Attested "+release+"@"+digest+" (attestations "+repo+":"+signature.AttestationTag(digest)+"@sha256:")
	verify := func(ref string, args ...string) (string, error) {
		return runPkgsync(t, append([]string{"verify", ref, "--registry-config", dockerConfig}, args...)...)
	}

	t.Run("verified: signature, provenance and SBOM", func(t *testing.T) {
		out, err := verify(release, "--key", pub, "--attestation", "slsaprovenance1", "--attestation", "spdxjson")
		require.NoError(t, err)
		assert.Equal(t, "Verified "+repo+"@"+digest+" with cosign.pub\n"+
			"Verified the "+intoto.ProvenancePredicateType+" attestation of "+repo+"@"+digest+" with cosign.pub\n"+
			"Verified the "+intoto.SPDXPredicateType+" attestation of "+repo+"@"+digest+" with cosign.pub\n", out)
	})

	t.Run("signing again replaces the attestations of the same key", func(t *testing.T) {
		_, err := runPkgsync(t, "sign", release, "--key", key, "--provenance", prov, "--sbom", sbom, "--registry-config", dockerConfig)
		require.NoError(t, err)
		m := fetchManifest(t, repo, signature.AttestationTag(digest))
		assert.Len(t, m.Layers, 2, "one provenance and one SBOM attestation")
	})

	t.Run("refused: a wrong key", func(t *testing.T) {
		_, err := verify(release, "--key", otherPub, "--attestation", "slsaprovenance1")
		require.ErrorIs(t, err, signature.ErrSignatureInvalid)
		// Attestations by another key than the image's signature do not count either.
		other := repo + ":other-attester"
		d := pushStandIn(t, other, dockerConfig, "2")
		otherSBOM, otherProv := releaseFiles(t, repo, d)
		_, err = runPkgsync(t, "sign", other, "--key", key, "--registry-config", dockerConfig)
		require.NoError(t, err)
		c := testClient(t)
		k, err := signature.LoadSigningKey(mustRead(t, otherKey), []byte("s3cret"))
		require.NoError(t, err)
		ref, err := source.ParseReference(other + "@" + d)
		require.NoError(t, err)
		sbomStmt, err := intoto.SBOMStatement(mustRead(t, otherSBOM), repo, d)
		require.NoError(t, err)
		_, err = signature.Attest(t.Context(), c, ref, k, [][]byte{mustRead(t, otherProv), sbomStmt}, nil)
		require.NoError(t, err)
		_, err = verify(other, "--key", pub, "--attestation", "slsaprovenance1")
		require.ErrorIs(t, err, signature.ErrNoAttestation)
		assert.ErrorContains(t, err, "signed by none of the keys")
	})

	t.Run("install --verify-attestation installs the attested digest", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "install", "--export", "--image", release, "--verify-key", pub,
			"--verify-attestation", "slsaprovenance1", "--verify-attestation", "spdxjson", "--registry-config", dockerConfig)
		require.NoError(t, err)
		assert.Contains(t, stderr, "verified the "+intoto.ProvenancePredicateType+" attestation of "+release+" with cosign.pub")
		assert.Contains(t, stdout, "image: "+repo+"@"+digest)
	})

	t.Run("refused: a missing attachment", func(t *testing.T) {
		bare := repo + ":signed-only"
		d := pushStandIn(t, bare, dockerConfig, "3")
		_, err := runPkgsync(t, "sign", bare, "--key", key, "--registry-config", dockerConfig)
		require.NoError(t, err)
		_, err = verify(bare, "--key", pub)
		require.NoError(t, err, "the signature alone verifies")
		_, err = verify(bare, "--key", pub, "--attestation", "slsaprovenance1")
		require.ErrorIs(t, err, signature.ErrNoAttestation)
		assert.ErrorContains(t, err, "the registry has no "+repo+":"+signature.AttestationTag(d))
		stdout, _, err := runCLI(t, "install", "--export", "--image", bare, "--verify-key", pub,
			"--verify-attestation", "slsaprovenance1", "--registry-config", dockerConfig)
		require.ErrorIs(t, err, signature.ErrNoAttestation)
		assert.ErrorContains(t, err, "the controller image is not installed")
		assert.Empty(t, stdout, "nothing printed or applied")
		_, _, err = runCLI(t, "install", "--export", "--image", bare, "--verify-attestation", "slsaprovenance1")
		assert.Equal(t, 2, exitCodeOf(err), "--verify-attestation needs --verify-key")

		// An SBOM attested, no provenance: the provenance is still missing.
		sbomOnly, _ := releaseFiles(t, repo, d)
		_, err = runPkgsync(t, "sign", bare, "--key", key, "--sbom", sbomOnly, "--registry-config", dockerConfig)
		require.NoError(t, err)
		_, err = verify(bare, "--key", pub, "--attestation", "spdxjson")
		require.NoError(t, err)
		_, err = verify(bare, "--key", pub, "--attestation", "slsaprovenance1")
		require.ErrorIs(t, err, signature.ErrNoAttestation)
	})

	t.Run("refused: a tampered image", func(t *testing.T) {
		// The tag moved to other content after the release was signed.
		moved := repo + ":moved"
		before := pushStandIn(t, moved, dockerConfig, "4")
		beforeSBOM, beforeProv := releaseFiles(t, repo, before)
		_, err := runPkgsync(t, "sign", moved, "--key", key, "--provenance", beforeProv, "--sbom", beforeSBOM, "--registry-config", dockerConfig)
		require.NoError(t, err)
		after := pushStandIn(t, moved, dockerConfig, "5")
		require.NotEqual(t, before, after)
		_, err = verify(moved, "--key", pub, "--attestation", "slsaprovenance1")
		require.ErrorIs(t, err, signature.ErrNoSignature)

		// The signature and attestations of the release copied next to other content: the
		// signature names the release's digest, and so does the provenance statement.
		copyTag(t, repo, signature.SignatureTag(digest), signature.SignatureTag(after))
		copyTag(t, repo, signature.AttestationTag(digest), signature.AttestationTag(after))
		_, err = verify(moved, "--key", pub)
		require.ErrorIs(t, err, signature.ErrSignatureInvalid)
		c := testClient(t)
		keys, err := signature.ParsePublicKeys(map[string][]byte{"cosign.pub": mustRead(t, pub)})
		require.NoError(t, err)
		ref, err := source.ParseReference(moved)
		require.NoError(t, err)
		_, err = signature.VerifyAttestation(t.Context(), c, ref, keys, intoto.ProvenancePredicateType, nil)
		require.ErrorIs(t, err, signature.ErrNoAttestation)
		assert.ErrorContains(t, err, "statement is about sha256:"+strings.TrimPrefix(digest, "sha256:")+", not "+after)

		// pkgsync sign refuses a provenance statement about other content than the image.
		_, err = runPkgsync(t, "sign", moved, "--key", key, "--provenance", prov, "--registry-config", dockerConfig)
		require.ErrorContains(t, err, "statement is about "+digest+", not "+after)
	})
}

// TestReleaseAttestationsCosign: cosign verify and cosign verify-attestation accept what pkgsync
// sign makes of a release, and cosign refuses them with another key.
func TestReleaseAttestationsCosign(t *testing.T) {
	bin, err := testenv.BinDir()
	require.NoError(t, err)
	cosign := filepath.Join(bin, "cosign")
	if _, err := os.Stat(cosign); err != nil {
		t.Skipf("interoperability with the cosign CLI not tested: %s is missing; `make cosign` builds it from the module proxy", cosign)
	}
	s := newSigningSetup(t)
	reg, dockerConfig, key, pub, otherPub := s.reg, s.dockerConfig, s.key, s.pub, s.otherPub

	repo := reg.Host + "/" + testenv.Repository(t, "platform/pkgsync")
	digest := pushStandIn(t, repo+":v1", dockerConfig, "1")
	sbom, prov := releaseFiles(t, repo, digest)
	_, err = runPkgsync(t, "sign", repo+":v1", "--key", key, "--provenance", prov, "--sbom", sbom, "--registry-config", dockerConfig)
	require.NoError(t, err)
	pinned := repo + "@" + digest
	run := func(args ...string) (string, error) {
		home := t.TempDir()
		cmd := exec.CommandContext(t.Context(), cosign, args...)
		cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+home, "SIGSTORE_NO_CACHE=true")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	offline := []string{"--insecure-ignore-tlog=true", "--allow-http-registry"}

	out, err := run(append([]string{"verify", "--key", pub}, append(offline, pinned)...)...)
	require.NoError(t, err, out)
	out, err = run(append([]string{"verify", "--key", otherPub}, append(offline, pinned)...)...)
	require.Error(t, err, "cosign refuses another key: %s", out)
	for _, tt := range []struct{ cosignType, predicateType string }{
		{"slsaprovenance1", intoto.ProvenancePredicateType},
		{"spdxjson", intoto.SPDXPredicateType},
	} {
		out, err := run(append([]string{"verify-attestation", "--key", pub, "--type", tt.cosignType}, append(offline, pinned)...)...)
		require.NoError(t, err, short(out))
		assert.Equal(t, tt.predicateType, verifiedPredicateType(t, out))
		out, err = run(append([]string{"verify-attestation", "--key", otherPub, "--type", tt.cosignType}, append(offline, pinned)...)...)
		require.Error(t, err, "cosign refuses another key: %s", short(out))
	}
}

// verifiedPredicateType reads the predicate type of the statement in the DSSE envelope that
// cosign verify-attestation prints.
func verifiedPredicateType(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var env struct {
			Payload []byte `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &env) != nil || env.Payload == nil {
			continue
		}
		var stmt struct {
			PredicateType string `json:"predicateType"`
		}
		require.NoError(t, json.Unmarshal(env.Payload, &stmt))
		return stmt.PredicateType
	}
	t.Fatalf("no envelope in cosign's output: %s", short(out))
	return ""
}

// short cuts cosign's output to what fits in a failure message.
func short(out string) string {
	if len(out) > 2000 {
		return out[:2000] + "..."
	}
	return out
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	return data
}

func testClient(t *testing.T) *source.Client {
	t.Helper()
	c, err := source.NewClient(source.Options{})
	require.NoError(t, err)
	return c
}

// plainRepository is the repository at repo (HOST/PATH) of the test registry, over HTTP.
func plainRepository(t *testing.T, repo string) *remote.Repository {
	t.Helper()
	r, err := remote.NewRepository(repo)
	require.NoError(t, err)
	r.PlainHTTP = true
	return r
}

// fetchManifest reads the manifest tagged tag in repo.
func fetchManifest(t *testing.T, repo, tag string) struct{ Layers []json.RawMessage } {
	t.Helper()
	r := plainRepository(t, repo)
	desc, rc, err := r.FetchReference(t.Context(), tag)
	require.NoError(t, err)
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	require.NoError(t, err)
	var m struct{ Layers []json.RawMessage }
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

// copyTag tags the manifest from names with to, in repo: what anyone who can push can do.
func copyTag(t *testing.T, repo, from, to string) {
	t.Helper()
	r := plainRepository(t, repo)
	desc, rc, err := r.FetchReference(t.Context(), from)
	require.NoError(t, err)
	data, err := content.ReadAll(rc, desc)
	require.NoError(t, rc.Close())
	require.NoError(t, err)
	require.NoError(t, r.PushReference(t.Context(), desc, bytes.NewReader(data), to))
}
