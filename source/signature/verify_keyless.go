package signature

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/internal/regexcost"
	"pkgsync.dev/pkgsync/source"
)

// How cosign (--new-bundle-format, the default of cosign 3) stores a keyless signature: a
// sigstore bundle in an OCI 1.1 manifest whose subject is the image, found through the
// referrers API (or the referrers tag schema, sha256-HEX, on registries without it). The bundle
// holds a DSSE envelope of an in-toto statement about the image's digest.
const (
	// BundleMediaType is the artifact type of such a manifest and the media type of its layer.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SignPredicateType is the predicate type of cosign's signature statements. Attestations
	// (provenance, SBOMs) are bundles of the same artifact type; they are not signatures.
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
	// BundlePredicateTypeAnnotation names the predicate type on the referrer's manifest.
	BundlePredicateTypeAnnotation = "dev.sigstore.bundle.predicateType"
)

const (
	// maxBundles bounds the bundles read per digest.
	maxBundles = 16
	// maxBundleBytes bounds one bundle: a certificate chain, log entries and a signature.
	maxBundleBytes = 256 << 10
	// maxTrustedRootBytes bounds trusted_root.json (the public good instance's is ~10 KiB).
	maxTrustedRootBytes = 1 << 20
	// maxIdentities bounds the identities of a policy.
	maxIdentities = 16
	// maxReferrerPages bounds the pages of a referrers listing.
	maxReferrerPages = 4
	// maxReferrerPageBytes bounds one page of a referrers listing as read (oras' own bound,
	// Repository.MaxMetadataBytes, is 4 MiB). A descriptor is a few hundred bytes, so a page
	// holds over a thousand; decoded, the shortest JSON ones cost 40 times their size.
	maxReferrerPageBytes = 512 << 10
	// maxVerifyTime bounds one verification, which reads what whoever can push wrote, and is
	// not run under a deadline by every caller: a registry that trickles bytes does not hold a
	// worker longer.
	maxVerifyTime = 2 * time.Minute
)

// ErrNoMatchingIdentity wraps failures where a bundle verified up to its certificate, whose
// identity matched none of the policy's.
var ErrNoMatchingIdentity = errors.New("no identity matches")

// OIDCIdentity matches the identity a keyless signature's certificate was issued to: regular
// expressions (RE2) for the OIDC issuer and for the subject (the certificate's subject
// alternative name: an e-mail address, or a URI such as a CI workflow). Each must match the
// whole value: they are anchored at both ends.
type OIDCIdentity struct {
	Issuer  string
	Subject string
}

// KeylessPolicy is what a keyless signature must satisfy: a certificate issued by a
// certificate authority of the trusted root to one of the identities, and an entry in a
// transparency log of the root whose time falls within the certificate's validity. Nothing is
// fetched: the trusted root is all the trust.
type KeylessPolicy struct {
	trusted    root.TrustedMaterial
	verifier   *verify.Verifier
	identities []verify.CertificateIdentity
	described  []string
	id         string
}

// NewKeylessPolicy parses a trusted root (trusted_root.json, as `cosign trusted-root create`
// writes it or the Sigstore TUF repository serves it) and the identities, of which a
// signature's certificate must match one.
func NewKeylessPolicy(trustedRoot []byte, identities []OIDCIdentity) (*KeylessPolicy, error) {
	if len(trustedRoot) > maxTrustedRootBytes {
		return nil, fmt.Errorf("trusted root of %d bytes: %w (at most %d)", len(trustedRoot), source.ErrLimit, maxTrustedRootBytes)
	}
	if len(identities) == 0 {
		return nil, errors.New("no identity given: keyless signatures need the issuer and subject to trust")
	}
	if len(identities) > maxIdentities {
		return nil, fmt.Errorf("%d identities given, at most %d are accepted", len(identities), maxIdentities)
	}
	tr, err := root.NewTrustedRootFromJSON(trustedRoot)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 || len(tr.RekorLogs()) == 0 {
		return nil, errors.New("trusted root: it names no certificate authority or no transparency log")
	}
	// The log's entry gives the time the certificate must have been valid at; a signed
	// timestamp (RFC 3161) counts too.
	v, err := verify.NewVerifier(tr, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	p := &KeylessPolicy{trusted: tr, verifier: v}
	h := sha256.New()
	h.Write(trustedRoot)
	for i, id := range identities {
		if id.Issuer == "" || id.Subject == "" {
			return nil, fmt.Errorf("identity %d: both the issuer and the subject are required", i+1)
		}
		issuer, err := anchored(id.Issuer)
		if err != nil {
			return nil, fmt.Errorf("identity %d: issuer: %w", i+1, err)
		}
		subject, err := anchored(id.Subject)
		if err != nil {
			return nil, fmt.Errorf("identity %d: subject: %w", i+1, err)
		}
		ci, err := verify.NewShortCertificateIdentity("", issuer, "", subject)
		if err != nil {
			return nil, fmt.Errorf("identity %d: %w", i+1, err)
		}
		p.identities = append(p.identities, ci)
		p.described = append(p.described, fmt.Sprintf("issuer %q subject %q", id.Issuer, id.Subject))
		// Length-prefixed: no two lists of identities encode alike, whatever bytes they hold.
		fmt.Fprintf(h, "%d:%s%d:%s", len(id.Issuer), id.Issuer, len(id.Subject), id.Subject)
	}
	p.id = hex.EncodeToString(h.Sum(nil))
	return p, nil
}

// anchored makes a regular expression match whole values only. The expression must be one on
// its own: wrapped unchecked, "a)|(?:.*" would become "^(?:a)|(?:.*)$", which compiles and
// matches anything. It must also be within regexcost's size limits: sigstore-go matches it
// against each certificate's identity, a call pkgsync cannot price, so the pattern's program is
// bounded instead (and a certificate's identity by the bundle's size).
func anchored(re string) (string, error) {
	if _, err := regexcost.Compile(re); err != nil {
		return "", err
	}
	return "^(?:" + re + ")$", nil
}

// ID names the policy (the trusted root and the identities) for caches.
func (p *KeylessPolicy) ID() string { return p.id }

// String lists the identities, for messages.
func (p *KeylessPolicy) String() string { return "[" + strings.Join(p.described, "; ") + "]" }

// VerifyKeyless checks that the digest ref names (resolved first when ref has only a tag) has
// a cosign keyless signature that verifies under the policy: signed by a certificate for one of
// its identities, logged, and stating that it signs this digest. Signatures are read where
// cosign 2 stores them, the layers of the sha256-<digest>.sig tag, then where cosign 3 does,
// sigstore bundles among the image's referrers. It returns the verified signature, with the
// identity that matched as Key. The error wraps ErrNoSignature when the image has neither and
// ErrSignatureInvalid when none verifies.
func VerifyKeyless(ctx context.Context, c *source.Client, ref source.Reference, p *KeylessPolicy, creds source.Credentials) (*Verification, error) {
	ctx, cancel := context.WithTimeout(ctx, maxVerifyTime)
	defer cancel()
	dgst, loc, repo, err := c.LocateRepository(ctx, ref, creds)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", ref, err)
	}
	d, err := digest.Parse(dgst)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", ref, err)
	}
	sigRef := source.Reference{Registry: loc.Registry, Repository: loc.Repository, Tag: SignatureTag(dgst)}
	identity, failures, err := verifyKeylessTag(ctx, c, repo, sigRef, dgst, p)
	if err != nil {
		return nil, fmt.Errorf("verify %s@%s: %w", ref.Name(), dgst, err)
	}
	if identity != "" {
		return &Verification{Digest: dgst, Key: identity, Signature: sigRef}, nil
	}
	bundles, more, err := listBundles(ctx, repo, d)
	if err != nil {
		return nil, fmt.Errorf("verify %s@%s: list the image's referrers: %w", ref.Name(), dgst, c.Explain(loc, err))
	}
	if len(bundles) == 0 && len(failures) == 0 {
		return nil, fmt.Errorf("verify %s@%s: %w: no signature in %s and no sigstore bundle (%s) refers to the image", ref.Name(), dgst, ErrNoSignature, sigRef, BundleMediaType)
	}
	raw, err := hex.DecodeString(d.Encoded())
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", ref, err)
	}
	for i, desc := range bundles {
		where := source.Reference{Registry: loc.Registry, Repository: loc.Repository, Digest: desc.Digest.String()}
		identity, err := verifyBundle(ctx, repo, desc, d.Algorithm().String(), raw, p)
		if err == nil {
			return &Verification{Digest: dgst, Key: identity, Signature: where}, nil
		}
		failures = append(failures, fmt.Sprintf("bundle %d (%s): %v", i+1, desc.Digest, err))
	}
	if more {
		failures = append(failures, fmt.Sprintf("more bundles not read (at most %d are)", maxBundles))
	}
	return nil, fmt.Errorf("verify %s@%s: %w for the identities %s: %s", ref.Name(), dgst, ErrSignatureInvalid, p, strings.Join(failures, "; "))
}

// listBundles returns the image's referrers that are sigstore bundles, at most maxBundles,
// signatures before other bundles, and whether there were more.
//
// The registry decides how many referrers there are: the listing reads at most maxReferrerPages
// pages of at most maxReferrerPageBytes each (source.ListReferrers), and keeps maxBundles of
// each kind, so what is kept does not grow with what is listed.
func listBundles(ctx context.Context, repo *remote.Repository, d digest.Digest) ([]ocispec.Descriptor, bool, error) {
	var signatures, others []ocispec.Descriptor
	more := false
	err := source.ListReferrers(ctx, repo, d, BundleMediaType, maxReferrerPages, maxReferrerPageBytes, func(page []ocispec.Descriptor) error {
		for _, desc := range page {
			// The annotation is a hint for the order only: the statement inside is checked.
			kind := &others
			if desc.Annotations[BundlePredicateTypeAnnotation] == SignPredicateType {
				kind = &signatures
			}
			if len(*kind) == maxBundles {
				more = true
				continue
			}
			*kind = append(*kind, desc)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	all := append(signatures, others...)
	if len(all) > maxBundles {
		return all[:maxBundles], true, nil
	}
	return all, more, nil
}

// verifyBundle reads one bundle and verifies it for the digest (algorithm, raw) under the
// policy. It returns the identity that matched.
func verifyBundle(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, algorithm string, raw []byte, p *KeylessPolicy) (string, error) {
	b, err := fetchBundle(ctx, repo, desc)
	if err != nil {
		return "", err
	}
	res, err := p.verify(b, verify.WithArtifactDigest(algorithm, raw))
	if err != nil {
		return "", err
	}
	if err := checkSignatureStatement(res); err != nil {
		return "", err
	}
	return identityOf(res), nil
}

// verify checks a bundle under the policy, for the artifact: the certificate, one of the
// identities, the log entry and the signature. What was signed is the caller's to check.
func (p *KeylessPolicy) verify(b *bundle.Bundle, artifact verify.ArtifactPolicyOption) (*verify.VerificationResult, error) {
	opts := make([]verify.PolicyOption, 0, len(p.identities))
	for _, id := range p.identities {
		opts = append(opts, verify.WithCertificateIdentity(id))
	}
	res, err := p.verifier.Verify(b, verify.NewPolicy(artifact, opts...))
	if err != nil {
		var mismatch *verify.ErrNoMatchingCertificateIdentity
		if errors.As(err, &mismatch) {
			return nil, fmt.Errorf("%w: %w", ErrNoMatchingIdentity, err)
		}
		return nil, err
	}
	return res, nil
}

// identityOf names the certificate identity of a verified bundle.
func identityOf(res *verify.VerificationResult) string {
	cert := res.Signature.Certificate
	return fmt.Sprintf("issuer %s subject %s", cert.Issuer, cert.SubjectAlternativeName)
}

// fetchBundle reads one bundle manifest and its bundle, bounded and digest-checked.
func fetchBundle(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) (*bundle.Bundle, error) {
	data, err := source.FetchManifest(ctx, repo, desc)
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != BundleMediaType {
		return nil, fmt.Errorf("want one layer of media type %s", BundleMediaType)
	}
	layer := m.Layers[0]
	if layer.Size > maxBundleBytes {
		return nil, fmt.Errorf("bundle of %d bytes: %w (at most %d)", layer.Size, source.ErrLimit, maxBundleBytes)
	}
	body, err := content.FetchAll(ctx, repo.Blobs(), layer)
	if err != nil {
		return nil, fmt.Errorf("fetch bundle: %w", err)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(body); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return &b, nil
}

// checkSignatureStatement refuses a verified bundle that is not cosign's signature of an
// image: a statement about the digest of another type (an attestation) does not count.
func checkSignatureStatement(res *verify.VerificationResult) error {
	if res.Statement == nil {
		return fmt.Errorf("a bundle without an in-toto statement: cosign signs images with a statement of type %s", SignPredicateType)
	}
	if res.Statement.GetPredicateType() != SignPredicateType {
		return fmt.Errorf("a statement of type %q, not a signature (%s)", res.Statement.GetPredicateType(), SignPredicateType)
	}
	return nil
}
