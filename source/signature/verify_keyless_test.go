package signature

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

const (
	testIssuer   = "https://issuer.example"
	testIdentity = "ci@example.com"
)

// newSigstore starts a virtual Sigstore and returns it with its trusted root.
func newSigstore(t *testing.T) (*testenv.Sigstore, []byte) {
	t.Helper()
	s, err := testenv.NewSigstore()
	require.NoError(t, err)
	trusted, err := s.TrustedRoot()
	require.NoError(t, err)
	return s, trusted
}

// signKeyless signs digest in the registry at ref's repository keylessly, as cosign 3 does,
// with a statement of predicateType about subjectDigest (the image's digest, unless a test
// wants a statement about another).
func signKeyless(t *testing.T, s *testenv.Sigstore, ref source.Reference, digest, subjectDigest, predicateType, identity string) {
	t.Helper()
	b, err := s.SignImage(ref.Name(), subjectDigest, predicateType, identity, testIssuer)
	require.NoError(t, err)
	_, err = testenv.AttachBundle(t.Context(), ref.Registry, ref.Repository, digest, b, predicateType)
	require.NoError(t, err)
}

func mustPolicy(t *testing.T, trusted []byte, ids ...OIDCIdentity) *KeylessPolicy {
	t.Helper()
	p, err := NewKeylessPolicy(trusted, ids)
	require.NoError(t, err)
	return p
}

// Keyless signatures verify offline against the trusted root, for the identities given only,
// for the digest they name only, and signatures only (not other attestations).
func TestVerifyKeyless(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	ctx := t.Context()
	sigstore, trusted := newSigstore(t)
	_, otherTrusted := newSigstore(t)
	ci := OIDCIdentity{Issuer: `https://issuer\.example`, Subject: `ci@example\.com`}

	img, ref := pushPackage(t, c, reg.Host, testenv.Repository(t, "keyless"), nil)
	_, err := VerifyKeyless(ctx, c, ref, mustPolicy(t, trusted, ci), nil)
	require.ErrorIs(t, err, ErrNoSignature, "unsigned")

	signKeyless(t, sigstore, ref, img.Digest, img.Digest, SignPredicateType, testIdentity)
	v, err := VerifyKeyless(ctx, c, ref, mustPolicy(t, trusted, ci), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, v.Digest)
	assert.Equal(t, "issuer "+testIssuer+" subject "+testIdentity, v.Key)

	// Any identity of the list may match.
	v, err = VerifyKeyless(ctx, c, ref, mustPolicy(t, trusted, OIDCIdentity{Issuer: ".*", Subject: "nobody"}, ci), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, v.Digest)

	refused := []struct {
		name   string
		policy *KeylessPolicy
		want   string
	}{
		{"another subject", mustPolicy(t, trusted, OIDCIdentity{Issuer: ci.Issuer, Subject: `release@example\.com`}), "no identity matches"},
		{"another issuer", mustPolicy(t, trusted, OIDCIdentity{Issuer: `https://other\.example`, Subject: ci.Subject}), "no identity matches"},
		{"a subject that only contains the pattern", mustPolicy(t, trusted, OIDCIdentity{Issuer: ci.Issuer, Subject: `ci@example`}), "no identity matches"},
		{"another trusted root", mustPolicy(t, otherTrusted, ci), "transparency log"},
	}
	for _, tc := range refused {
		_, err := VerifyKeyless(ctx, c, ref, tc.policy, nil)
		require.ErrorIs(t, err, ErrSignatureInvalid, tc.name)
		assert.ErrorContains(t, err, tc.want, tc.name)
	}

	// A signature of another image attached to this one, and an attestation of this one, do
	// not count.
	otherRef := mustRef(t, reg.Host+"/"+testenv.Repository(t, "keyless-other")+":v1")
	other := pushOther(t, c, otherRef, "other: true\n")
	require.NotEqual(t, img.Digest, other)
	signKeyless(t, sigstore, otherRef, other, img.Digest, SignPredicateType, testIdentity)
	_, err = VerifyKeyless(ctx, c, otherRef, mustPolicy(t, trusted, ci), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid, "a statement about another digest")
	attested, attestedRef := pushPackage(t, c, reg.Host, testenv.Repository(t, "keyless-attested"), nil)
	signKeyless(t, sigstore, attestedRef, attested.Digest, attested.Digest, "https://slsa.dev/provenance/v1", testIdentity)
	_, err = VerifyKeyless(ctx, c, attestedRef, mustPolicy(t, trusted, ci), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid, "an attestation")
	assert.ErrorContains(t, err, "not a signature")
}

func TestNewKeylessPolicyRefuses(t *testing.T) {
	t.Parallel()
	_, trusted := newSigstore(t)
	cases := []struct {
		name    string
		trusted []byte
		ids     []OIDCIdentity
		want    string
	}{
		{"no identity", trusted, nil, "no identity given"},
		{"no subject", trusted, []OIDCIdentity{{Issuer: "x"}}, "both the issuer and the subject are required"},
		{"bad expression", trusted, []OIDCIdentity{{Issuer: "(", Subject: "x"}}, "identity 1"},
		// Wrapped in ^(?:...)$ unchecked, this would be ^(?:a)|(?:.*)$: any subject.
		{"escapes its anchors", trusted, []OIDCIdentity{{Issuer: "https://issuer", Subject: "https://github\\.com/acme/x)|(?:.*"}}, "identity 1: subject"},
		{"not a trusted root", []byte(`{"mediaType": "nonsense"}`), []OIDCIdentity{{Issuer: "x", Subject: "y"}}, "trusted root"},
		// Issue 41: a tenant's expression that expands to a large program would cost its size
		// times the certificate's identity on every verification, inside sigstore-go.
		{"expands to a large program", trusted, []OIDCIdentity{{Issuer: "https://issuer", Subject: "(https://github\\.com/acme/x){999}"}}, "identity 1: subject: regular expression over the size limits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewKeylessPolicy(tc.trusted, tc.ids)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
