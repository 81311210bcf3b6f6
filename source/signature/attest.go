package signature

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/source"
)

// How cosign (attest, verify-attestation) stores signed attestations of an image: a manifest
// tagged ALG-HEX.att in the image's repository, one layer per attestation, each a DSSE envelope
// of an in-toto statement about the image's digest, its predicate type in an annotation.
const (
	// DSSEMediaType is the media type of an attestation layer.
	DSSEMediaType = "application/vnd.dsse.envelope.v1+json"
	// InTotoPayloadType is the DSSE payload type of an in-toto statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
	// PredicateTypeAnnotation names an attestation layer's predicate type.
	PredicateTypeAnnotation = "predicateType"
	// attestationTagSuffix ends the tag of an image's attestations.
	attestationTagSuffix = ".att"
	// maxAttestationBytes bounds one DSSE envelope: an SBOM of a few hundred modules is some
	// hundred kilobytes, base64-encoded.
	maxAttestationBytes = 8 << 20
)

// ErrNoAttestation: the registry holds no attestation of the wanted predicate type for the
// digest that one of the keys signed.
var ErrNoAttestation = errors.New("no attestation verifies")

// AttestationTag is the tag cosign stores the attestations of dgst under: sha256-HEX.att.
func AttestationTag(dgst string) string {
	return strings.Replace(dgst, ":", "-", 1) + attestationTagSuffix
}

// statementHead is what is read of an in-toto statement to check it.
type statementHead struct {
	Type    string `json:"_type"`
	Subject []struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	PredicateType string `json:"predicateType"`
}

// checkStatement parses an in-toto statement and checks that it is about dgst.
func checkStatement(stmt []byte, dgst string) (*statementHead, error) {
	var head statementHead
	if err := json.Unmarshal(stmt, &head); err != nil {
		return nil, fmt.Errorf("not an in-toto statement: %w", err)
	}
	if !strings.HasPrefix(head.Type, "https://in-toto.io/Statement/") {
		return nil, fmt.Errorf("not an in-toto statement: _type %q", head.Type)
	}
	if head.PredicateType == "" {
		return nil, errors.New("the statement has no predicateType")
	}
	d, err := digest.Parse(dgst)
	if err != nil {
		return nil, err
	}
	for _, s := range head.Subject {
		if s.Digest[d.Algorithm().String()] == d.Encoded() {
			return &head, nil
		}
	}
	var about []string
	for _, s := range head.Subject {
		for alg, hex := range s.Digest {
			about = append(about, alg+":"+hex)
		}
	}
	return nil, fmt.Errorf("the %s statement is about %s, not %s", head.PredicateType, strings.Join(about, ", "), dgst)
}

// Attest signs in-toto statements about the image ref names with key and stores them as cosign
// attest does: DSSE envelopes, each a layer of the manifest tagged AttestationTag(digest), so
// that `cosign verify-attestation --key` and VerifyAttestation accept them. Each statement must
// name the image's digest among its subjects: a statement about other content is refused. An
// attestation by the same key of the same predicate type is replaced. ECDSA signatures are
// randomized: the envelopes differ from run to run, the statements they carry do not.
func Attest(ctx context.Context, c *source.Client, ref source.Reference, key *SigningKey, statements [][]byte, creds source.Credentials) (source.Reference, error) {
	repo, err := c.Repository(ctx, ref, creds)
	if err != nil {
		return source.Reference{}, fmt.Errorf("attest %s: %w", ref, err)
	}
	dgst := ref.Digest
	if dgst == "" {
		desc, err := repo.Resolve(ctx, ref.Tag)
		if err != nil {
			return source.Reference{}, fmt.Errorf("attest %s: %w", ref, c.Explain(ref, err))
		}
		dgst = desc.Digest.String()
	}
	attRef := source.Reference{Registry: ref.Registry, Repository: ref.Repository, Tag: AttestationTag(dgst)}
	existing, err := readSignatureManifest(ctx, c, repo, attRef)
	if err != nil && !errors.Is(err, ErrNoSignature) {
		return source.Reference{}, fmt.Errorf("attest %s: %w", ref, err)
	}
	signer := dsse.WrapSigner(key.signer, InTotoPayloadType)
	verifier := dsse.WrapVerifier(key.signer)
	var added []ocispec.Descriptor
	replaced := map[string]bool{}
	for _, stmt := range statements {
		head, err := checkStatement(stmt, dgst)
		if err != nil {
			return source.Reference{}, fmt.Errorf("attest %s@%s: %w", ref.Name(), dgst, err)
		}
		envelope, err := signer.SignMessage(bytes.NewReader(stmt))
		if err != nil {
			return source.Reference{}, fmt.Errorf("attest %s: %w", ref, err)
		}
		layer := content.NewDescriptorFromBytes(DSSEMediaType, envelope)
		// cosign reads the signature annotation of every layer; an attestation's is empty.
		layer.Annotations = map[string]string{SignatureAnnotation: "", PredicateTypeAnnotation: head.PredicateType}
		if err := source.PushBlob(ctx, repo, layer, envelope); err != nil {
			return source.Reference{}, fmt.Errorf("attest %s: push attestation: %w", ref, c.Explain(attRef, err))
		}
		added = append(added, layer)
		replaced[head.PredicateType] = true
	}
	var layers []ocispec.Descriptor
	if existing != nil {
		for _, l := range existing.Layers {
			if replaced[l.Annotations[PredicateTypeAnnotation]] && l.Size <= maxAttestationBytes {
				if env, err := fetchLimited(ctx, c, repo, attRef, l, maxAttestationBytes); err == nil &&
					verifier.VerifySignature(bytes.NewReader(env), nil) == nil {
					continue
				}
			}
			layers = append(layers, l)
		}
	}
	layers = append(layers, added...)
	pushed, err := pushLayers(ctx, c, repo, layers, attRef)
	if err != nil {
		return source.Reference{}, fmt.Errorf("attest %s: push attestations: %w", ref, err)
	}
	return pushed, nil
}

// AttestationVerification is a verified attestation.
type AttestationVerification struct {
	// Digest is the image digest the statement is about.
	Digest string
	// Key names the key that signed it.
	Key string
	// PredicateType is the statement's predicate type.
	PredicateType string
	// Statement is the verified in-toto statement.
	Statement []byte
}

// VerifyAttestation checks that the image ref names carries an attestation, stored as cosign
// attest stores it (the .att tag), that one of keys signed (DSSE), whose in-toto statement is
// about the image's digest and of predicateType. A tag is resolved first. As with Verify, no
// transparency log is consulted. The error wraps ErrNoAttestation when none verifies.
func VerifyAttestation(ctx context.Context, c *source.Client, ref source.Reference, keys *PublicKeys, predicateType string, creds source.Credentials) (*AttestationVerification, error) {
	if keys == nil || len(keys.keys) == 0 {
		return nil, fmt.Errorf("verify attestation of %s: no public key given", ref)
	}
	ctx, cancel := context.WithTimeout(ctx, maxVerifyTime)
	defer cancel()
	repo, err := c.Repository(ctx, ref, creds)
	if err != nil {
		return nil, fmt.Errorf("verify attestation of %s: %w", ref, err)
	}
	dgst, err := resolveAt(ctx, c, repo, ref)
	if err != nil {
		return nil, fmt.Errorf("verify attestation of %s: %w", ref, err)
	}
	attRef := source.Reference{Registry: ref.Registry, Repository: ref.Repository, Tag: AttestationTag(dgst)}
	manifest, err := readSignatureManifest(ctx, c, repo, attRef)
	if errors.Is(err, ErrNoSignature) {
		return nil, fmt.Errorf("verify attestation of %s@%s: %w: the registry has no %s", ref.Name(), dgst, ErrNoAttestation, attRef)
	}
	if err != nil {
		return nil, fmt.Errorf("verify attestation of %s@%s: %w", ref.Name(), dgst, err)
	}
	verifiers := make([]namedVerifier, len(keys.keys))
	for i, k := range keys.keys {
		verifiers[i] = namedVerifier{name: k.name, verifier: dsse.WrapVerifier(k.verifier)}
	}
	var failures []string
	for i, layer := range manifest.Layers {
		if i == maxSignatureLayers {
			failures = append(failures, fmt.Sprintf("%d more attestations not read (at most %d are)", len(manifest.Layers)-i, maxSignatureLayers))
			break
		}
		if layer.MediaType != DSSEMediaType {
			failures = append(failures, fmt.Sprintf("attestation %d: media type %q is not %s", i+1, layer.MediaType, DSSEMediaType))
			continue
		}
		// Only layers that say they hold the wanted type are read; a verified statement's own
		// predicateType is what counts.
		if pt, ok := layer.Annotations[PredicateTypeAnnotation]; ok && pt != predicateType {
			continue
		}
		v, err := verifyAttestationLayer(ctx, c, repo, attRef, layer, dgst, predicateType, verifiers)
		if err == nil {
			return v, nil
		}
		failures = append(failures, fmt.Sprintf("attestation %d: %v", i+1, err))
	}
	if len(failures) == 0 {
		failures = append(failures, fmt.Sprintf("%s holds none of predicate type %s", attRef, predicateType))
	}
	return nil, fmt.Errorf("verify attestation of %s@%s: %w with the keys %s: %s", ref.Name(), dgst, ErrNoAttestation, keys, strings.Join(failures, "; "))
}

// verifyAttestationLayer verifies one DSSE envelope and the statement it carries.
func verifyAttestationLayer(ctx context.Context, c *source.Client, repo *remote.Repository, attRef source.Reference, layer ocispec.Descriptor, dgst, predicateType string, verifiers []namedVerifier) (*AttestationVerification, error) {
	envelope, err := fetchLimited(ctx, c, repo, attRef, layer, maxAttestationBytes)
	if err != nil {
		return nil, err
	}
	key := ""
	for _, v := range verifiers {
		if v.verifier.VerifySignature(bytes.NewReader(envelope), nil) == nil {
			key = v.name
			break
		}
	}
	if key == "" {
		return nil, errors.New("signed by none of the keys")
	}
	// Only a verified envelope is parsed for its claims.
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     []byte `json:"payload"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, fmt.Errorf("signed by %s: %w", key, err)
	}
	if env.PayloadType != InTotoPayloadType {
		return nil, fmt.Errorf("signed by %s: payload type %q is not %s", key, env.PayloadType, InTotoPayloadType)
	}
	head, err := checkStatement(env.Payload, dgst)
	if err != nil {
		return nil, fmt.Errorf("signed by %s: %w", key, err)
	}
	if head.PredicateType != predicateType {
		return nil, fmt.Errorf("signed by %s: predicate type %s, not %s", key, head.PredicateType, predicateType)
	}
	return &AttestationVerification{Digest: dgst, Key: key, PredicateType: head.PredicateType, Statement: env.Payload}, nil
}

// fetchLimited downloads a blob of at most limit bytes, digest-checked.
func fetchLimited(ctx context.Context, c *source.Client, repo *remote.Repository, ref source.Reference, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit {
		return nil, fmt.Errorf("%s of %d bytes: %w (at most %d)", desc.Digest, desc.Size, source.ErrLimit, limit)
	}
	rc, err := repo.Fetch(ctx, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", desc.Digest, c.Explain(ref, err))
	}
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", desc.Digest, err)
	}
	return data, nil
}

// resolveAt returns the digest ref names in repo, the repository ref names as written (no
// override or mirror): ref's own digest, else its tag's, asked of the registry.
func resolveAt(ctx context.Context, c *source.Client, repo *remote.Repository, ref source.Reference) (string, error) {
	if ref.Digest != "" {
		return ref.Digest, nil
	}
	if ref.Tag == "" {
		return "", fmt.Errorf("resolve %s: the reference names neither a tag nor a digest", ref)
	}
	desc, err := repo.Resolve(ctx, ref.Tag)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, c.Explain(ref, err))
	}
	return desc.Digest.String(), nil
}
