package signature

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// signCosign2 signs digest in ref's repository keylessly as cosign 2 does (the .sig tag),
// bent by opts.
func signCosign2(t *testing.T, s *testenv.Sigstore, ref source.Reference, digest, identity string, opts testenv.Cosign2Options) {
	t.Helper()
	sig, err := s.SignImageCosign2(ref.Name(), digest, identity, testIssuer, opts)
	require.NoError(t, err)
	require.NoError(t, testenv.AttachCosign2Signatures(t.Context(), ref.Registry, ref.Repository, digest, sig))
}

// Keyless signatures in cosign 2's format (a certificate and a Rekor bundle in the annotations
// of a sha256-<digest>.sig layer) verify offline against the trusted root, for the identities
// given only.
func TestVerifyKeylessCosign2(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	sigstore, trusted := newSigstore(t)
	ci := OIDCIdentity{Issuer: `https://issuer\.example`, Subject: `ci@example\.com`}

	img, ref := pushPackage(t, c, reg.Host, testenv.Repository(t, "cosign2"), nil)
	signCosign2(t, sigstore, ref, img.Digest, testIdentity, testenv.Cosign2Options{})
	v, err := VerifyKeyless(t.Context(), c, ref, mustPolicy(t, trusted, ci), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, v.Digest)
	assert.Equal(t, "issuer "+testIssuer+" subject "+testIdentity, v.Key)
	assert.Equal(t, SignatureTag(img.Digest), v.Signature.Tag)

	_, err = VerifyKeyless(t.Context(), c, ref, mustPolicy(t, trusted, OIDCIdentity{Issuer: ci.Issuer, Subject: `release@example\.com`}), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid, "another identity")
	assert.ErrorContains(t, err, "no identity matches")
}

// Each part of a cosign 2 keyless signature's chain of trust is checked: a signature that fails
// one is refused, saying which.
func TestVerifyKeylessCosign2Refuses(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	sigstore, trusted := newSigstore(t)
	otherCA, _ := newSigstore(t)
	ci := OIDCIdentity{Issuer: `https://issuer\.example`, Subject: `ci@example\.com`}

	refused := []struct {
		name string
		opts testenv.Cosign2Options
		want string
	}{
		{"a certificate from another CA", testenv.Cosign2Options{CA: otherCA}, "does not chain to a certificate authority of the trusted root"},
		{"a payload for another digest", testenv.Cosign2Options{SignedDigest: "sha256:" + strings.Repeat("ab", 32)}, "for sha256:abab"},
		{"no signed entry timestamp", testenv.Cosign2Options{NoSET: true}, "no SignedEntryTimestamp"},
		{"a tampered signed entry timestamp", testenv.Cosign2Options{TamperSET: true}, "signed entry timestamp"},
		{"no Rekor bundle", testenv.Cosign2Options{NoBundle: true}, "no dev.sigstore.cosign/bundle annotation"},
		{"logged after the certificate expired", testenv.Cosign2Options{IntegratedTime: time.Now().Add(30 * time.Minute)}, "outside the certificate's validity"},
	}
	for i, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			img, ref := pushPackage(t, c, reg.Host, testenv.Repository(t, "cosign2-refused-"+string(rune('a'+i))), nil)
			signCosign2(t, sigstore, ref, img.Digest, testIdentity, tc.opts)
			_, err := VerifyKeyless(t.Context(), c, ref, mustPolicy(t, trusted, ci), nil)
			require.ErrorIs(t, err, ErrSignatureInvalid)
			assert.ErrorContains(t, err, "signature 1")
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// A keyless signature copied from another image's .sig tag names the other digest.
func TestVerifyKeylessCosign2RefusesReplay(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	sigstore, trusted := newSigstore(t)
	ci := OIDCIdentity{Issuer: `https://issuer\.example`, Subject: `ci@example\.com`}

	name := testenv.Repository(t, "cosign2-replay")
	img, ref := pushPackage(t, c, reg.Host, name, nil)
	sig, err := sigstore.SignImageCosign2(ref.Name(), img.Digest, testIdentity, testIssuer, testenv.Cosign2Options{})
	require.NoError(t, err)
	otherRef := mustRef(t, reg.Host+"/"+name+":v2")
	other := pushOther(t, c, otherRef, "other: true\n")
	require.NoError(t, testenv.AttachCosign2Signatures(t.Context(), reg.Host, otherRef.Repository, other, sig))
	_, err = VerifyKeyless(t.Context(), c, otherRef, mustPolicy(t, trusted, ci), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid)
	assert.ErrorContains(t, err, "for "+img.Digest+", not "+other)
}
