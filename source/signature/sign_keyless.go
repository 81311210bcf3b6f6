package signature

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"

	"pkgsync.dev/pkgsync/source"
)

// keylessServiceTimeout bounds one request to Fulcio or Rekor.
const keylessServiceTimeout = 30 * time.Second

// ErrCertificateKey: the certificate authority returned a certificate for another public key
// than the one that asked for it. Nothing is logged or pushed then.
var ErrCertificateKey = errors.New("the certificate is not for the signing key")

// KeylessSigning says where a keyless signature gets its certificate and its log entry, and
// who signs: Fulcio issues a short-lived certificate for an ephemeral key to the identity an
// OIDC token vouches for, and Rekor logs the signature.
type KeylessSigning struct {
	// FulcioURL is the base URL of the certificate authority (https://fulcio.sigstore.dev).
	FulcioURL string
	// RekorURL is the base URL of the transparency log (https://rekor.sigstore.dev), Rekor's v1 API.
	RekorURL string
	// IdentityToken is the OIDC token Fulcio checks; its subject is the signer's identity.
	IdentityToken string
	// TrustedRoot (trusted_root.json), when set, checks every bundle once made: a certificate
	// of one of its authorities and an entry of one of its logs. Without it the signature is
	// pushed as the services returned it.
	TrustedRoot []byte
}

// KeylessSignatures is what SignKeyless pushed.
type KeylessSignatures struct {
	// Digest is the signed image digest.
	Digest string
	// Signature is the referrer holding the signature's bundle.
	Signature source.Reference
	// Attestations are the referrers holding the attestations' bundles, in the statements' order.
	Attestations []source.Reference
	// Identity is the certificate's subject alternative name: who signed.
	Identity string
}

// SignKeyless signs the image ref names (a tag is resolved first) keylessly, as cosign 3 does:
// an ephemeral key, a certificate from Fulcio for it issued to the token's identity, and for
// the signature and each statement a sigstore bundle (a DSSE envelope of an in-toto statement
// about the digest, the certificate, the Rekor entry with its inclusion proof and promise)
// stored as an OCI 1.1 referrer of the image. `cosign verify --certificate-identity ...
// --certificate-oidc-issuer ...`, `cosign verify-attestation` and VerifyKeyless accept them.
// The statements must be about the image's digest. The certificate must be for the ephemeral
// key: another one (ErrCertificateKey) fails before anything is logged or pushed.
func SignKeyless(ctx context.Context, c *source.Client, ref source.Reference, ks KeylessSigning, statements [][]byte, creds source.Credentials) (*KeylessSignatures, error) {
	if ks.FulcioURL == "" || ks.RekorURL == "" || ks.IdentityToken == "" {
		return nil, fmt.Errorf("sign %s keylessly: the Fulcio URL, the Rekor URL and an identity token are all needed", ref)
	}
	var trusted root.TrustedMaterial
	if len(ks.TrustedRoot) > 0 {
		tr, err := root.NewTrustedRootFromJSON(ks.TrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("trusted root: %w", err)
		}
		trusted = tr
	}
	repo, err := c.Repository(ctx, ref, creds)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", ref, err)
	}
	tagOrDigest := ref.Digest
	if tagOrDigest == "" {
		tagOrDigest = ref.Tag
	}
	subject, err := repo.Resolve(ctx, tagOrDigest)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", ref, c.Explain(ref, err))
	}
	dgst := subject.Digest.String()
	// Every statement is checked before anything is asked of Fulcio.
	signature, err := signatureStatement(ref.Name(), subject.Digest)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", ref, err)
	}
	all := [][]byte{signature}
	types := []string{SignPredicateType}
	for _, stmt := range statements {
		head, err := checkStatement(stmt, dgst)
		if err != nil {
			return nil, fmt.Errorf("attest %s@%s: %w", ref.Name(), dgst, err)
		}
		all = append(all, stmt)
		types = append(types, head.PredicateType)
	}

	key, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", ref, err)
	}
	certs := &checkedCertificate{fulcio: sign.NewFulcio(&sign.FulcioOptions{BaseURL: ks.FulcioURL, Timeout: keylessServiceTimeout})}
	opts := sign.BundleOptions{
		CertificateProvider:        certs,
		CertificateProviderOptions: &sign.CertificateProviderOptions{IDToken: ks.IdentityToken},
		TransparencyLogs:           []sign.Transparency{sign.NewRekor(&sign.RekorOptions{BaseURL: ks.RekorURL, Timeout: keylessServiceTimeout})},
		Context:                    ctx,
		TrustedRoot:                trusted,
	}
	out := &KeylessSignatures{Digest: dgst}
	for i, stmt := range all {
		pb, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: InTotoPayloadType}, key, opts)
		if err != nil {
			return nil, fmt.Errorf("sign %s@%s (%s): %w", ref.Name(), dgst, types[i], err)
		}
		body, err := (&bundle.Bundle{Bundle: pb}).MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("sign %s@%s: %w", ref.Name(), dgst, err)
		}
		pushed, err := pushBundle(ctx, c, ref, subject, body, types[i], creds)
		if err != nil {
			return nil, fmt.Errorf("sign %s@%s: push the %s bundle: %w", ref.Name(), dgst, types[i], err)
		}
		if i == 0 {
			out.Signature = pushed
		} else {
			out.Attestations = append(out.Attestations, pushed)
		}
	}
	out.Identity = certs.identity
	return out, nil
}

// signatureStatement is cosign's statement that signs an image: of type SignPredicateType,
// about the digest, with an empty predicate.
func signatureStatement(name string, d digest.Digest) ([]byte, error) {
	return json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": name, "digest": map[string]string{d.Algorithm().String(): d.Encoded()}}},
		"predicateType": SignPredicateType,
		"predicate":     map[string]any{},
	})
}

// pushBundle stores a bundle as cosign 3 does: an OCI 1.1 manifest of artifact type
// BundleMediaType with the bundle as its one layer, whose subject is the image.
func pushBundle(ctx context.Context, c *source.Client, ref source.Reference, subject ocispec.Descriptor, body []byte, predicateType string, creds source.Credentials) (source.Reference, error) {
	repo, err := c.Repository(ctx, ref, creds)
	if err != nil {
		return source.Reference{}, err
	}
	layer := content.NewDescriptorFromBytes(BundleMediaType, body)
	if err := source.PushBlob(ctx, repo, layer, body); err != nil {
		return source.Reference{}, c.Explain(ref, err)
	}
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, BundleMediaType, oras.PackManifestOptions{
		Subject: &ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Layers:  []ocispec.Descriptor{layer},
		ManifestAnnotations: map[string]string{
			BundlePredicateTypeAnnotation: predicateType,
			"dev.sigstore.bundle.content": "dsse-envelope",
		},
	})
	if err != nil {
		return source.Reference{}, c.Explain(ref, err)
	}
	return source.Reference{Registry: ref.Registry, Repository: ref.Repository, Digest: desc.Digest.String()}, nil
}

// checkedCertificate asks Fulcio for a certificate once per signing run and keeps it only when
// it certifies the key that asked: sigstore-go takes Fulcio's answer as it comes, and a
// certificate for another key would put an entry nobody can verify in a public log, or, from a
// Fulcio that answers with someone else's certificate, a signature in their name.
type checkedCertificate struct {
	fulcio   *sign.Fulcio
	der      []byte
	identity string
}

func (p *checkedCertificate) GetCertificate(ctx context.Context, key sign.Keypair, opts *sign.CertificateProviderOptions) ([]byte, error) {
	if p.der != nil {
		return p.der, nil
	}
	der, err := p.fulcio.GetCertificate(ctx, key, opts)
	if err != nil {
		return nil, fmt.Errorf("get a certificate from Fulcio: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("the certificate from Fulcio: %w", err)
	}
	if err := cryptoutils.EqualKeys(cert.PublicKey, key.GetPublicKey()); err != nil {
		return nil, fmt.Errorf("the certificate from Fulcio for %s: %w", identityOfCert(cert), ErrCertificateKey)
	}
	p.der, p.identity = der, identityOfCert(cert)
	return der, nil
}

// identityOfCert is a certificate's subject alternative name, as cosign matches it.
func identityOfCert(cert *x509.Certificate) string {
	names := cryptoutils.GetSubjectAlternateNames(cert)
	if len(names) == 0 {
		return "(no subject alternative name)"
	}
	return names[0]
}
