package signature

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/source"
)

// Where and how cosign stores signatures of an image: a manifest tagged ALG-HEX.sig in the
// image's repository, one layer per signature. Each layer is a simple-signing payload naming the
// signed digest; its annotation holds the base64 signature of the payload.
const (
	// SimpleSigningMediaType is the media type of a signature layer (the payload).
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the base64 signature of the layer's payload.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// signatureTagSuffix ends the tag of an image's signatures.
	signatureTagSuffix = ".sig"
)

// Bounds on what a verification reads from the registry, whoever wrote it.
const (
	// maxSignatureLayers bounds the signatures read per image; cosign adds one per signing.
	maxSignatureLayers = 64
	// maxPayloadBytes bounds one payload; cosign's are a few hundred bytes.
	maxPayloadBytes = 64 << 10
	// maxSignatureBytes bounds one decoded signature.
	maxSignatureBytes = 8 << 10
	// maxSignatureManifestBytes bounds a signature manifest (the .sig tag): whoever can push
	// writes it, and every resource that verifies the digest reads it. cosign's hold a layer
	// descriptor of a few kilobytes per signature (certificate and log entry included), so
	// maxSignatureLayers of them fit.
	maxSignatureManifestBytes = 512 << 10
)

// Causes of a failed verification, for errors.Is.
var (
	// ErrNoSignature: the registry holds no signature for the digest.
	ErrNoSignature = errors.New("no signature found")
	// ErrSignatureInvalid: signatures exist, but none verifies with the keys for this digest.
	ErrSignatureInvalid = errors.New("no signature verifies")
)

// SignatureTag is the tag cosign stores the signatures of digest under: sha256-HEX.sig.
func SignatureTag(dgst string) string {
	return strings.Replace(dgst, ":", "-", 1) + signatureTagSuffix
}

// Verification says which key verified which digest.
type Verification struct {
	// Digest is the verified manifest digest.
	Digest string
	// Key names the key that verified a signature.
	Key string
	// Signature is the reference of the signature manifest.
	Signature source.Reference
}

// Sign signs the image ref names (pinned to its digest) with key and stores the signature as
// cosign does: a layer added to the manifest tagged SignatureTag(digest) in the same repository,
// so that `cosign verify --key` and Verify accept it. A tag is resolved first. Signing an image
// twice with the same key adds no second layer. It returns the signature manifest's reference.
func Sign(ctx context.Context, c *source.Client, ref source.Reference, key *SigningKey, creds source.Credentials) (source.Reference, error) {
	repo, err := c.Repository(ctx, ref, creds)
	if err != nil {
		return source.Reference{}, fmt.Errorf("sign %s: %w", ref, err)
	}
	dgst := ref.Digest
	if dgst == "" {
		desc, err := repo.Resolve(ctx, ref.Tag)
		if err != nil {
			return source.Reference{}, fmt.Errorf("sign %s: %w", ref, c.Explain(ref, err))
		}
		dgst = desc.Digest.String()
	}
	imageName, err := name.NewDigest(ref.Name() + "@" + dgst)
	if err != nil {
		return source.Reference{}, fmt.Errorf("sign %s: %w", ref, err)
	}
	body, err := payload.Cosign{Image: imageName}.MarshalJSON()
	if err != nil {
		return source.Reference{}, fmt.Errorf("sign %s: payload: %w", ref, err)
	}
	sig, err := key.signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return source.Reference{}, fmt.Errorf("sign %s: %w", ref, err)
	}
	layer := content.NewDescriptorFromBytes(SimpleSigningMediaType, body)
	layer.Annotations = map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)}

	sigRef := source.Reference{Registry: ref.Registry, Repository: ref.Repository, Tag: SignatureTag(dgst)}
	existing, err := readSignatureManifest(ctx, c, repo, sigRef)
	if err != nil && !errors.Is(err, ErrNoSignature) {
		return source.Reference{}, fmt.Errorf("sign %s: %w", ref, err)
	}
	layers := []ocispec.Descriptor{}
	if existing != nil {
		for _, l := range existing.Layers {
			// A signature by the same key over the same payload is replaced, not repeated.
			if l.Digest == layer.Digest && key.signer.VerifySignature(bytes.NewReader(decodeSignature(l)), bytes.NewReader(body)) == nil {
				continue
			}
			layers = append(layers, l)
		}
	}
	layers = append(layers, layer)
	if err := source.PushBlob(ctx, repo, layer, body); err != nil {
		return source.Reference{}, fmt.Errorf("sign %s: push payload: %w", ref, c.Explain(sigRef, err))
	}
	pushed, err := pushLayers(ctx, c, repo, layers, sigRef)
	if err != nil {
		return source.Reference{}, fmt.Errorf("sign %s: push signature: %w", ref, err)
	}
	return pushed, nil
}

// pushLayers pushes layers (already uploaded) as an image manifest tagged at tagged's tag, with
// the config cosign writes beside them (the layers' digests as diff IDs): how cosign stores
// signatures (.sig) and attestations (.att). It returns tagged pinned to the manifest.
func pushLayers(ctx context.Context, c *source.Client, repo *remote.Repository, layers []ocispec.Descriptor, tagged source.Reference) (source.Reference, error) {
	diffIDs := make([]digest.Digest, len(layers))
	for i, l := range layers {
		diffIDs[i] = l.Digest
	}
	config, err := json.Marshal(ocispec.Image{RootFS: ocispec.RootFS{Type: "layers", DiffIDs: diffIDs}})
	if err != nil {
		return source.Reference{}, err
	}
	configDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, config)
	if err := source.PushBlob(ctx, repo, configDesc, config); err != nil {
		return source.Reference{}, fmt.Errorf("config: %w", c.Explain(tagged, err))
	}
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    configDesc,
		Layers:    layers,
	})
	if err != nil {
		return source.Reference{}, err
	}
	manifestDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, manifest)
	if err := repo.PushReference(ctx, manifestDesc, bytes.NewReader(manifest), tagged.Tag); err != nil {
		return source.Reference{}, c.Explain(tagged, err)
	}
	return tagged.WithDigest(manifestDesc.Digest.String()), nil
}

// Verify checks that the image ref names carries a cosign signature, in the registry next to
// it, made by one of keys over its digest. A tag is resolved first; verify a digest-pinned
// reference to be sure that what is verified is what is pulled. Each signature's payload must
// name the digest (a signature copied from another image does not count). Transparency-log
// entries are not checked: the keys are the trust. The error wraps ErrNoSignature when the
// registry holds no signature for the digest and ErrSignatureInvalid when none of those it
// holds verifies.
func Verify(ctx context.Context, c *source.Client, ref source.Reference, keys *PublicKeys, creds source.Credentials) (*Verification, error) {
	return verifyWithin(ctx, c, ref, keys, creds, maxVerifyTime)
}

// verifyWithin is Verify bounded by timeout (tests lower it).
func verifyWithin(ctx context.Context, c *source.Client, ref source.Reference, keys *PublicKeys, creds source.Credentials, timeout time.Duration) (*Verification, error) {
	if keys == nil || len(keys.keys) == 0 {
		return nil, fmt.Errorf("verify %s: no public key given", ref)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dgst, loc, repo, err := c.LocateRepository(ctx, ref, creds)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", ref, err)
	}
	sigRef := source.Reference{Registry: loc.Registry, Repository: loc.Repository, Tag: SignatureTag(dgst)}
	manifest, err := readSignatureManifest(ctx, c, repo, sigRef)
	noTag := errors.Is(err, ErrNoSignature)
	if err != nil && !noTag {
		return nil, fmt.Errorf("verify %s@%s: %w", ref.Name(), dgst, err)
	}
	var failures []string
	if manifest != nil {
		for i, layer := range manifest.Layers {
			if i == maxSignatureLayers {
				failures = append(failures, fmt.Sprintf("%d more signatures not read (at most %d are)", len(manifest.Layers)-i, maxSignatureLayers))
				break
			}
			key, err := verifyLayer(ctx, c, repo, sigRef, layer, dgst, keys)
			if err == nil {
				return &Verification{Digest: dgst, Key: key, Signature: sigRef}, nil
			}
			failures = append(failures, fmt.Sprintf("signature %d: %v", i+1, err))
		}
	}
	// cosign 3 stores signatures as sigstore bundles that refer to the image.
	key, bundleRef, bundleFailures, err := verifyKeyedBundles(ctx, c, repo, loc, dgst, keys)
	if err != nil {
		return nil, fmt.Errorf("verify %s@%s: %w", ref.Name(), dgst, err)
	}
	if key != "" {
		return &Verification{Digest: dgst, Key: key, Signature: bundleRef}, nil
	}
	failures = append(failures, bundleFailures...)
	if len(failures) == 0 {
		where := fmt.Sprintf("the signature manifest %s holds no signature", sigRef)
		if noTag {
			where = fmt.Sprintf("the registry has no %s", sigRef)
		}
		return nil, fmt.Errorf("verify %s@%s: %w: %s, and no sigstore bundle refers to the image", ref.Name(), dgst, ErrNoSignature, where)
	}
	return nil, fmt.Errorf("verify %s@%s: %w with the keys %s: %s", ref.Name(), dgst, ErrSignatureInvalid, keys, strings.Join(failures, "; "))
}

// readSignatureManifest fetches the signature manifest sigRef names, bounded in size. A missing
// tag is ErrNoSignature.
func readSignatureManifest(ctx context.Context, c *source.Client, repo *remote.Repository, sigRef source.Reference) (*ocispec.Manifest, error) {
	desc, rc, err := repo.FetchReference(ctx, sigRef.Tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, ErrNoSignature
	}
	if err != nil {
		return nil, fmt.Errorf("read signatures %s: %w", sigRef, c.Explain(sigRef, err))
	}
	defer rc.Close()
	if desc.Size > maxSignatureManifestBytes {
		return nil, fmt.Errorf("read signatures %s: manifest of %d bytes: %w (at most %d)", sigRef, desc.Size, source.ErrLimit, maxSignatureManifestBytes)
	}
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("read signatures %s: %w", sigRef, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read signatures %s: %w", sigRef, err)
	}
	return &m, nil
}

// verifyLayer checks one signature layer: its payload (digest-verified on download) must carry a
// signature one of keys made, and name dgst. It returns the name of that key.
func verifyLayer(ctx context.Context, c *source.Client, repo *remote.Repository, sigRef source.Reference, layer ocispec.Descriptor, dgst string, keys *PublicKeys) (string, error) {
	sig, err := layerSignature(layer)
	if err != nil {
		return "", err
	}
	body, err := fetchPayload(ctx, c, repo, sigRef, layer)
	if err != nil {
		return "", err
	}
	key := ""
	for _, k := range keys.keys {
		if k.verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(body)) == nil {
			key = k.name
			break
		}
	}
	if key == "" {
		if _, ok := layer.Annotations[CertificateAnnotation]; ok {
			return "", errors.New("made by none of the keys (a keyless signature, with a certificate)")
		}
		return "", errors.New("made by none of the keys")
	}
	// Only a verified payload is parsed: its claims mean nothing before.
	if err := checkPayload(body, dgst, key); err != nil {
		return "", err
	}
	return key, nil
}

// layerSignature checks a signature layer's media type and returns its decoded, bounded
// signature.
func layerSignature(layer ocispec.Descriptor) ([]byte, error) {
	if layer.MediaType != SimpleSigningMediaType {
		return nil, fmt.Errorf("media type %q is not %s", layer.MediaType, SimpleSigningMediaType)
	}
	encoded, ok := layer.Annotations[SignatureAnnotation]
	if !ok {
		return nil, fmt.Errorf("no %s annotation", SignatureAnnotation)
	}
	if base64.StdEncoding.DecodedLen(len(encoded)) > maxSignatureBytes {
		return nil, fmt.Errorf("signature of %d bytes: %w (at most %d)", base64.StdEncoding.DecodedLen(len(encoded)), source.ErrLimit, maxSignatureBytes)
	}
	sig, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("signature annotation: %w", err)
	}
	return sig, nil
}

// fetchPayload downloads a signature layer's payload, bounded and digest-checked.
func fetchPayload(ctx context.Context, c *source.Client, repo *remote.Repository, sigRef source.Reference, layer ocispec.Descriptor) ([]byte, error) {
	if layer.Size > maxPayloadBytes {
		return nil, fmt.Errorf("payload of %d bytes: %w (at most %d)", layer.Size, source.ErrLimit, maxPayloadBytes)
	}
	rc, err := repo.Fetch(ctx, layer)
	if err != nil {
		return nil, fmt.Errorf("fetch payload %s: %w", layer.Digest, c.Explain(sigRef, err))
	}
	defer rc.Close()
	body, err := content.ReadAll(rc, layer)
	if err != nil {
		return nil, fmt.Errorf("fetch payload %s: %w", layer.Digest, err)
	}
	return body, nil
}

// checkPayload parses a verified simple-signing payload, which signer signed, and checks that
// it is cosign's signature of dgst: a signature copied from another image names another digest.
func checkPayload(body []byte, dgst, signer string) error {
	var claims payload.SimpleContainerImage
	if err := json.Unmarshal(body, &claims); err != nil {
		return fmt.Errorf("payload signed by %s: %w", signer, err)
	}
	if claims.Critical.Type != payload.CosignSignatureType {
		return fmt.Errorf("payload signed by %s is of type %q, not %q", signer, claims.Critical.Type, payload.CosignSignatureType)
	}
	if got := claims.Critical.Image.DockerManifestDigest; got != dgst {
		return fmt.Errorf("signed by %s, but for %s, not %s", signer, got, dgst)
	}
	return nil
}

// decodeSignature returns a layer's signature, or nil.
func decodeSignature(layer ocispec.Descriptor) []byte {
	sig, err := base64.StdEncoding.DecodeString(layer.Annotations[SignatureAnnotation])
	if err != nil {
		return nil
	}
	return sig
}
