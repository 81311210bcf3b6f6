package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
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

// Attachment is a manifest to push beside an image, with its blobs: a referrer (pushed by digest;
// its subject names the image) or a manifest under a tag.
type Attachment struct {
	// Tag, when not empty, is the tag it is pushed under.
	Tag string
	// Manifest is the manifest's content and Descriptor describes it.
	Manifest   []byte
	Descriptor ocispec.Descriptor
	// Blobs are the blobs the manifest references.
	Blobs map[digest.Digest][]byte
}

// PushAttachments pushes attachments to the repository ref names (its tag or digest do not
// count): blobs first, then each manifest, by tag or, for a referrer, by digest (oras maintains
// the referrers tag schema on registries without the referrers API).
func (c *Client) PushAttachments(ctx context.Context, ref Reference, attachments []Attachment, creds Credentials) error {
	repo, err := c.repository(ctx, ref, creds)
	if err != nil {
		return fmt.Errorf("push attachments to %s: %w", ref.Name(), err)
	}
	for _, a := range attachments {
		digests := make([]digest.Digest, 0, len(a.Blobs))
		for d := range a.Blobs {
			digests = append(digests, d)
		}
		slices.Sort(digests)
		for _, d := range digests {
			data := a.Blobs[d]
			if err := pushBlob(ctx, repo, ocispec.Descriptor{MediaType: "application/octet-stream", Digest: d, Size: int64(len(data))}, data); err != nil {
				return fmt.Errorf("push attachment %s: blob %s: %w", a.Descriptor.Digest, d, c.explain(ref, err))
			}
		}
		if a.Tag != "" {
			err = repo.PushReference(ctx, a.Descriptor, bytes.NewReader(a.Manifest), a.Tag)
		} else {
			err = repo.Push(ctx, a.Descriptor, bytes.NewReader(a.Manifest))
		}
		if err != nil {
			return fmt.Errorf("push attachment %s: %w", a.Descriptor.Digest, c.explain(ref, err))
		}
	}
	return nil
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
func (c *Client) Attest(ctx context.Context, ref Reference, key *SigningKey, statements [][]byte, creds Credentials) (Reference, error) {
	repo, err := c.repository(ctx, ref, creds)
	if err != nil {
		return Reference{}, fmt.Errorf("attest %s: %w", ref, err)
	}
	dgst := ref.Digest
	if dgst == "" {
		desc, err := repo.Resolve(ctx, ref.Tag)
		if err != nil {
			return Reference{}, fmt.Errorf("attest %s: %w", ref, c.explain(ref, err))
		}
		dgst = desc.Digest.String()
	}
	attRef := Reference{Registry: ref.Registry, Repository: ref.Repository, Tag: AttestationTag(dgst)}
	existing, err := c.readSignatureManifest(ctx, repo, attRef)
	if err != nil && !errors.Is(err, ErrNoSignature) {
		return Reference{}, fmt.Errorf("attest %s: %w", ref, err)
	}
	signer := dsse.WrapSigner(key.signer, InTotoPayloadType)
	verifier := dsse.WrapVerifier(key.signer)
	var added []ocispec.Descriptor
	replaced := map[string]bool{}
	for _, stmt := range statements {
		head, err := checkStatement(stmt, dgst)
		if err != nil {
			return Reference{}, fmt.Errorf("attest %s@%s: %w", ref.Name(), dgst, err)
		}
		envelope, err := signer.SignMessage(bytes.NewReader(stmt))
		if err != nil {
			return Reference{}, fmt.Errorf("attest %s: %w", ref, err)
		}
		layer := content.NewDescriptorFromBytes(DSSEMediaType, envelope)
		// cosign reads the signature annotation of every layer; an attestation's is empty.
		layer.Annotations = map[string]string{SignatureAnnotation: "", PredicateTypeAnnotation: head.PredicateType}
		if err := pushBlob(ctx, repo, layer, envelope); err != nil {
			return Reference{}, fmt.Errorf("attest %s: push attestation: %w", ref, c.explain(attRef, err))
		}
		added = append(added, layer)
		replaced[head.PredicateType] = true
	}
	var layers []ocispec.Descriptor
	if existing != nil {
		for _, l := range existing.Layers {
			if replaced[l.Annotations[PredicateTypeAnnotation]] && l.Size <= maxAttestationBytes {
				if env, err := c.fetchLimited(ctx, repo, attRef, l, maxAttestationBytes); err == nil &&
					verifier.VerifySignature(bytes.NewReader(env), nil) == nil {
					continue
				}
			}
			layers = append(layers, l)
		}
	}
	layers = append(layers, added...)
	pushed, err := c.pushLayers(ctx, repo, layers, attRef)
	if err != nil {
		return Reference{}, fmt.Errorf("attest %s: push attestations: %w", ref, err)
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
func (c *Client) VerifyAttestation(ctx context.Context, ref Reference, keys *PublicKeys, predicateType string, creds Credentials) (*AttestationVerification, error) {
	if keys == nil || len(keys.keys) == 0 {
		return nil, fmt.Errorf("verify attestation of %s: no public key given", ref)
	}
	ctx, cancel := context.WithTimeout(ctx, c.verifyTimeout)
	defer cancel()
	cred, err := c.credential(ctx, ref.Registry, creds)
	if err != nil {
		return nil, fmt.Errorf("verify attestation of %s: %w", ref, err)
	}
	dgst, err := c.resolve(ctx, ref, cred)
	if err != nil {
		return nil, fmt.Errorf("verify attestation of %s: %w", ref, err)
	}
	repo := c.repositoryWith(ref, cred)
	attRef := Reference{Registry: ref.Registry, Repository: ref.Repository, Tag: AttestationTag(dgst)}
	manifest, err := c.readSignatureManifest(ctx, repo, attRef)
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
		v, err := c.verifyAttestationLayer(ctx, repo, attRef, layer, dgst, predicateType, verifiers)
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
func (c *Client) verifyAttestationLayer(ctx context.Context, repo *remote.Repository, attRef Reference, layer ocispec.Descriptor, dgst, predicateType string, verifiers []namedVerifier) (*AttestationVerification, error) {
	envelope, err := c.fetchLimited(ctx, repo, attRef, layer, maxAttestationBytes)
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
func (c *Client) fetchLimited(ctx context.Context, repo *remote.Repository, ref Reference, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit {
		return nil, fmt.Errorf("%s of %d bytes: %w (at most %d)", desc.Digest, desc.Size, ErrLimit, limit)
	}
	rc, err := repo.Fetch(ctx, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", desc.Digest, c.explain(ref, err))
	}
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", desc.Digest, err)
	}
	return data, nil
}
