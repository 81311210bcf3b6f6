package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
)

// Sigstore is a certificate authority, a transparency log and a timestamp authority of its own
// (sigstore-go's virtual Sigstore), to make keyless signatures without a network, as Fulcio and
// Rekor would.
type Sigstore struct {
	vs *ca.VirtualSigstore
}

// NewSigstore starts a fresh virtual Sigstore: its keys are its own, so its signatures verify
// with its trusted root only.
func NewSigstore() (*Sigstore, error) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		return nil, fmt.Errorf("virtual sigstore: %w", err)
	}
	return &Sigstore{vs: vs}, nil
}

// TrustedRoot is the trusted_root.json of the virtual Sigstore.
func (s *Sigstore) TrustedRoot() ([]byte, error) {
	return s.trustedRoot(s.vs.FulcioCertificateAuthorities())
}

// trustedRoot is the trusted_root.json of the virtual Sigstore's logs and timestamp authority,
// with the certificate authorities cas.
func (s *Sigstore) trustedRoot(cas []root.CertificateAuthority) ([]byte, error) {
	// The virtual Sigstore names its logs by the hex of their key IDs; the trusted root stores
	// the key IDs themselves.
	fix := func(logs map[string]*root.TransparencyLog) (map[string]*root.TransparencyLog, error) {
		out := map[string]*root.TransparencyLog{}
		for id, l := range logs {
			raw, err := hex.DecodeString(id)
			if err != nil {
				return nil, err
			}
			c := *l
			c.ID = raw
			out[id] = &c
		}
		return out, nil
	}
	rekor, err := fix(s.vs.RekorLogs())
	if err != nil {
		return nil, err
	}
	ct, err := fix(s.vs.CTLogs())
	if err != nil {
		return nil, err
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, cas, ct, s.vs.TimestampingAuthorities(), rekor)
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

// SignImage makes a keyless signature of an image digest as cosign 3 does: a sigstore bundle
// (v0.3) of a DSSE envelope holding an in-toto statement of predicateType about the digest,
// signed with a certificate issued to identity by issuer, logged with an inclusion proof and
// promise, and timestamped.
func (s *Sigstore) SignImage(name, imageDigest, predicateType, identity, issuer string) ([]byte, error) {
	statement, err := imageStatement(name, imageDigest, predicateType)
	if err != nil {
		return nil, err
	}
	// The certificate is valid from now for ten minutes; the log entry falls within.
	entity, err := s.vs.AttestAtTime(identity, issuer, statement, time.Now().Add(5*time.Minute), true)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return s.bundle(entity)
}

// imageStatement is cosign's in-toto statement about an image digest.
func imageStatement(name, imageDigest, predicateType string) ([]byte, error) {
	d, err := digest.Parse(imageDigest)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": name, "digest": map[string]string{d.Algorithm().String(): d.Encoded()}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{},
	})
}

// SignImageWithKey signs an image digest with a fresh key as cosign 3 does with --key and
// --tlog-upload=false: a sigstore bundle of a DSSE envelope of cosign's statement of
// predicateType about the digest, the key named by a hint, no log entry. It returns the bundle
// and the key's PEM public key.
func SignImageWithKey(name, imageDigest, predicateType string) (bundleJSON, publicKey []byte, err error) {
	statement, err := imageStatement(name, imageDigest, predicateType)
	if err != nil {
		return nil, nil, err
	}
	key, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, nil, err
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: "application/vnd.in-toto+json"}, key, sign.BundleOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	pub, err := key.GetPublicKeyPem()
	if err != nil {
		return nil, nil, err
	}
	bundleJSON, err = (&bundle.Bundle{Bundle: pb}).MarshalJSON()
	return bundleJSON, []byte(pub), err
}

// bundle writes a signed entity of the virtual Sigstore as a bundle.
func (s *Sigstore) bundle(entity *ca.TestEntity) ([]byte, error) {
	vc, err := entity.VerificationContent()
	if err != nil {
		return nil, err
	}
	cert, ok := vc.(*bundle.Certificate)
	if !ok {
		return nil, fmt.Errorf("verification content %T is not a certificate", vc)
	}
	sc, err := entity.SignatureContent()
	if err != nil {
		return nil, err
	}
	envelope, ok := sc.(*bundle.Envelope)
	if !ok {
		return nil, fmt.Errorf("signature content %T is not a DSSE envelope", sc)
	}
	raw := envelope.RawEnvelope()
	payload, err := base64.StdEncoding.DecodeString(raw.Payload)
	if err != nil {
		return nil, err
	}
	dsse := &protodsse.Envelope{Payload: payload, PayloadType: raw.PayloadType}
	for _, sig := range raw.Signatures {
		b, err := base64.StdEncoding.DecodeString(sig.Sig)
		if err != nil {
			return nil, err
		}
		dsse.Signatures = append(dsse.Signatures, &protodsse.Signature{Sig: b, Keyid: sig.KeyID})
	}
	entries, err := entity.TlogEntries()
	if err != nil {
		return nil, err
	}
	var tles []*protorekor.TransparencyLogEntry
	for _, e := range entries {
		tle := e.TransparencyLogEntry()
		tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
		// The log's promise (signed entry timestamp) over the entry, as Rekor v1 gives it.
		set, err := s.vs.RekorSignPayload(tlog.RekorPayload{
			Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
			IntegratedTime: tle.IntegratedTime,
			LogIndex:       tle.LogIndex,
			LogID:          hex.EncodeToString(tle.LogId.KeyId),
		})
		if err != nil {
			return nil, err
		}
		tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
		tles = append(tles, tle)
	}
	timestamps, err := entity.Timestamps()
	if err != nil {
		return nil, err
	}
	tvd := &protobundle.TimestampVerificationData{}
	for _, ts := range timestamps {
		tvd.Rfc3161Timestamps = append(tvd.Rfc3161Timestamps, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: ts})
	}
	b := &bundle.Bundle{Bundle: &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:                   &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: cert.Certificate().Raw}},
			TlogEntries:               tles,
			TimestampVerificationData: tvd,
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: dsse},
	}}
	return b.MarshalJSON()
}

// AttachBundle stores a sigstore bundle in the registry at host as cosign 3 does: an OCI 1.1
// manifest of artifact type application/vnd.dev.sigstore.bundle.v0.3+json whose subject is the
// image repository@imageDigest. It returns the manifest's digest.
func AttachBundle(ctx context.Context, host, repository, imageDigest string, bundleJSON []byte, predicateType string) (string, error) {
	const mediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	repo, err := remote.NewRepository(host + "/" + repository)
	if err != nil {
		return "", err
	}
	repo.PlainHTTP = true
	subject, err := repo.Resolve(ctx, imageDigest)
	if err != nil {
		return "", fmt.Errorf("resolve the image %s: %w", imageDigest, err)
	}
	layer := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(bundleJSON), Size: int64(len(bundleJSON))}
	if err := repo.Push(ctx, layer, bytes.NewReader(bundleJSON)); err != nil {
		return "", fmt.Errorf("push the bundle: %w", err)
	}
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, mediaType, oras.PackManifestOptions{
		Subject:             &subject,
		Layers:              []ocispec.Descriptor{layer},
		ManifestAnnotations: map[string]string{"dev.sigstore.bundle.predicateType": predicateType, "dev.sigstore.bundle.content": "dsse-envelope"},
	})
	if err != nil {
		return "", fmt.Errorf("push the bundle manifest: %w", err)
	}
	return desc.Digest.String(), nil
}
