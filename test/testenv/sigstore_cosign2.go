package testenv

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/rekor/pkg/pki"
	"github.com/sigstore/rekor/pkg/types"
	"github.com/sigstore/rekor/pkg/types/hashedrekord"

	// Registers the hashedrekord v0.0.1 entry type that cosign 2 logs.
	_ "github.com/sigstore/rekor/pkg/types/hashedrekord/v0.0.1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/registry/remote"
)

// The annotations cosign 2 puts on a keyless signature layer of the sha256-<digest>.sig tag.
const (
	cosign2SignatureAnnotation   = "dev.cosignproject.cosign/signature"
	cosign2CertificateAnnotation = "dev.sigstore.cosign/certificate"
	cosign2ChainAnnotation       = "dev.sigstore.cosign/chain"
	cosign2BundleAnnotation      = "dev.sigstore.cosign/bundle"
	simpleSigningMediaType       = "application/vnd.dev.cosign.simplesigning.v1+json"
)

// Cosign2Options bends a cosign 2 keyless signature for attack tests; the zero value is what
// cosign 2 writes.
type Cosign2Options struct {
	// CA issues the certificate instead of the Sigstore that signs (a CA the verifier does not trust).
	CA *Sigstore
	// SignedDigest is the digest the payload names, instead of the image's.
	SignedDigest string
	// IntegratedTime is the log's time for the entry; default: a minute after the certificate's start.
	IntegratedTime time.Time
	// NoSET leaves the signed entry timestamp out of the Rekor bundle.
	NoSET bool
	// TamperSET flips a bit of the signed entry timestamp.
	TamperSET bool
	// NoBundle leaves the Rekor bundle annotation out (cosign --tlog-upload=false).
	NoBundle bool
}

// Cosign2Signature is one signature layer of a sha256-<digest>.sig manifest: the payload blob
// and the layer's annotations.
type Cosign2Signature struct {
	Payload     []byte
	Annotations map[string]string
}

// SignImageCosign2 makes a keyless signature of an image digest as cosign 2 does (and cosign 3
// with --new-bundle-format=false): a simple-signing payload naming the digest, signed with a
// certificate the Sigstore's CA issued to identity by issuer, the signature logged as a
// hashedrekord entry whose signed entry timestamp (the "Rekor bundle") rides in an annotation.
func (s *Sigstore) SignImageCosign2(image, imageDigest, identity, issuer string, opts Cosign2Options) (*Cosign2Signature, error) {
	signed := imageDigest
	if opts.SignedDigest != "" {
		signed = opts.SignedDigest
	}
	ref, err := name.NewDigest(image + "@" + signed)
	if err != nil {
		return nil, err
	}
	body, err := payload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		return nil, err
	}
	ca := s
	if opts.CA != nil {
		ca = opts.CA
	}
	leaf, key, err := ca.vs.GenerateLeafCert(identity, issuer)
	if err != nil {
		return nil, fmt.Errorf("issue certificate: %w", err)
	}
	signer, err := signature.LoadSigner(key, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	sig, err := signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	leafPEM, err := cryptoutils.MarshalCertificateToPEM(leaf)
	if err != nil {
		return nil, err
	}
	fulcio, ok := ca.vs.FulcioCertificateAuthorities()[0].(*root.FulcioCertificateAuthority)
	if !ok {
		return nil, fmt.Errorf("certificate authority %T is not Fulcio's", ca.vs.FulcioCertificateAuthorities()[0])
	}
	chainPEM, err := cryptoutils.MarshalCertificatesToPEM(append(fulcio.Intermediates, fulcio.Root))
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{
		cosign2SignatureAnnotation:   base64.StdEncoding.EncodeToString(sig),
		cosign2CertificateAnnotation: string(leafPEM),
		cosign2ChainAnnotation:       string(chainPEM),
	}
	if !opts.NoBundle {
		integrated := opts.IntegratedTime
		if integrated.IsZero() {
			integrated = leaf.NotBefore.Add(time.Minute)
		}
		rekorBundle, err := s.rekorBundle(body, sig, leafPEM, integrated, opts)
		if err != nil {
			return nil, err
		}
		annotations[cosign2BundleAnnotation] = string(rekorBundle)
	}
	return &Cosign2Signature{Payload: body, Annotations: annotations}, nil
}

// rekorBundle logs a hashedrekord entry of the signature in the Sigstore's log and returns the
// "Rekor bundle" cosign 2 stores: the log's signed entry timestamp over the entry's body, time,
// index and log ID.
func (s *Sigstore) rekorBundle(body, sig, certPEM []byte, integrated time.Time, opts Cosign2Options) ([]byte, error) {
	ctx := context.Background()
	proposed, err := types.NewProposedEntry(ctx, hashedrekord.KIND, "0.0.1", types.ArtifactProperties{
		ArtifactHash:   digest.FromBytes(body).Encoded(),
		SignatureBytes: sig,
		PublicKeyBytes: [][]byte{certPEM},
		PKIFormat:      string(pki.X509),
	})
	if err != nil {
		return nil, fmt.Errorf("log entry: %w", err)
	}
	entry, err := types.CreateVersionedEntry(proposed)
	if err != nil {
		return nil, fmt.Errorf("log entry: %w", err)
	}
	canonical, err := types.CanonicalizeEntry(ctx, entry)
	if err != nil {
		return nil, fmt.Errorf("log entry: %w", err)
	}
	logID, err := s.vs.RekorLogID()
	if err != nil {
		return nil, err
	}
	p := tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(canonical),
		IntegratedTime: integrated.Unix(),
		LogIndex:       4242,
		LogID:          logID,
	}
	set, err := s.vs.RekorSignPayload(p)
	if err != nil {
		return nil, fmt.Errorf("sign entry timestamp: %w", err)
	}
	if opts.TamperSET {
		set[len(set)/2] ^= 1
	}
	out := map[string]any{"Payload": p}
	if !opts.NoSET {
		out["SignedEntryTimestamp"] = base64.StdEncoding.EncodeToString(set)
	}
	return json.Marshal(out)
}

// AttachCosign2Signatures stores signatures as cosign 2 does at host: a manifest tagged
// sha256-<hex>.sig in repository, one simple-signing layer per signature. It replaces what the
// tag held.
func AttachCosign2Signatures(ctx context.Context, host, repository, imageDigest string, sigs ...*Cosign2Signature) error {
	repo, err := remote.NewRepository(host + "/" + repository)
	if err != nil {
		return err
	}
	repo.PlainHTTP = true
	layers := make([]ocispec.Descriptor, 0, len(sigs))
	diffIDs := make([]digest.Digest, 0, len(sigs))
	for _, s := range sigs {
		layer := ocispec.Descriptor{MediaType: simpleSigningMediaType, Digest: digest.FromBytes(s.Payload), Size: int64(len(s.Payload)), Annotations: s.Annotations}
		if err := pushIfMissing(ctx, repo, layer, s.Payload); err != nil {
			return fmt.Errorf("push the payload: %w", err)
		}
		layers = append(layers, layer)
		diffIDs = append(diffIDs, layer.Digest)
	}
	config, err := json.Marshal(ocispec.Image{RootFS: ocispec.RootFS{Type: "layers", DiffIDs: diffIDs}})
	if err != nil {
		return err
	}
	configDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(config), Size: int64(len(config))}
	if err := pushIfMissing(ctx, repo, configDesc, config); err != nil {
		return fmt.Errorf("push the config: %w", err)
	}
	manifest, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: configDesc, Layers: layers})
	if err != nil {
		return err
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}
	tag := strings.Replace(imageDigest, ":", "-", 1) + ".sig"
	if err := repo.PushReference(ctx, desc, bytes.NewReader(manifest), tag); err != nil {
		return fmt.Errorf("push %s: %w", tag, err)
	}
	return nil
}

func pushIfMissing(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, data []byte) error {
	ok, err := repo.Exists(ctx, desc)
	if err != nil || ok {
		return err
	}
	return repo.Push(ctx, desc, bytes.NewReader(data))
}
