package signature

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/source"
)

// How cosign 2 (and cosign 3 with --new-bundle-format=false) stores a keyless signature: a
// layer of the sha256-<digest>.sig manifest, as for keys, whose annotations add the Fulcio
// certificate, its chain and the "Rekor bundle": the log entry's body, time, index and log ID
// with the log's signed entry timestamp (SET) over them, Rekor's promise that it logged the
// entry. There is no inclusion proof: the SET is the evidence.
const (
	// CertificateAnnotation holds the PEM certificate the signature was made with.
	CertificateAnnotation = "dev.sigstore.cosign/certificate"
	// ChainAnnotation holds the PEM chain of the certificate. It is not used: the trusted
	// root's certificate authorities are the trust, not what the signer sends along.
	ChainAnnotation = "dev.sigstore.cosign/chain"
	// RekorBundleAnnotation holds the Rekor bundle (JSON).
	RekorBundleAnnotation = "dev.sigstore.cosign/bundle"
)

// bundleV01MediaType is the sigstore bundle version whose log entries carry a promise (SET)
// and need no inclusion proof: what a cosign 2 signature converts to.
const bundleV01MediaType = "application/vnd.dev.sigstore.bundle+json;version=0.1"

// rekorBundle is the JSON of RekorBundleAnnotation.
type rekorBundle struct {
	// SignedEntryTimestamp is base64 in the JSON.
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		// Body is the base64 of the canonical log entry.
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		// LogID is the hex of the log's key ID.
		LogID string `json:"logID"`
	} `json:"Payload"`
}

// verifyKeylessTag looks for a keyless signature in cosign 2's format among the layers of the
// signature manifest sigRef names. It returns the identity that verified, or what failed per
// layer (nothing when the tag does not exist or holds no layer). Errors are those of reading the
// manifest.
func verifyKeylessTag(ctx context.Context, c *source.Client, repo *remote.Repository, sigRef source.Reference, dgst string, p *KeylessPolicy) (string, []string, error) {
	manifest, err := readSignatureManifest(ctx, c, repo, sigRef)
	if errors.Is(err, ErrNoSignature) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	var failures []string
	for i, layer := range manifest.Layers {
		if i == maxSignatureLayers {
			failures = append(failures, fmt.Sprintf("%d more signatures in %s not read (at most %d are)", len(manifest.Layers)-i, sigRef, maxSignatureLayers))
			break
		}
		identity, err := verifyKeylessLayer(ctx, c, repo, sigRef, layer, dgst, p)
		if err == nil {
			return identity, nil, nil
		}
		failures = append(failures, fmt.Sprintf("signature %d of %s: %v", i+1, sigRef, err))
	}
	return "", failures, nil
}

// verifyKeylessLayer checks one signature layer as a keyless signature: converted to a sigstore
// bundle, it must verify under the policy (certificate, identity, log entry) with the payload as
// the signed artifact, and the payload must name dgst. It returns the identity that matched.
func verifyKeylessLayer(ctx context.Context, c *source.Client, repo *remote.Repository, sigRef source.Reference, layer ocispec.Descriptor, dgst string, p *KeylessPolicy) (string, error) {
	sig, err := layerSignature(layer)
	if err != nil {
		return "", err
	}
	certPEM, ok := layer.Annotations[CertificateAnnotation]
	if !ok {
		return "", fmt.Errorf("no %s annotation: made with a key, not a certificate", CertificateAnnotation)
	}
	rekorJSON, ok := layer.Annotations[RekorBundleAnnotation]
	if !ok {
		return "", fmt.Errorf("no %s annotation: the signature was not logged in a transparency log (cosign --tlog-upload=false), which a keyless signature needs", RekorBundleAnnotation)
	}
	body, err := fetchPayload(ctx, c, repo, sigRef, layer)
	if err != nil {
		return "", err
	}
	b, err := cosign2Bundle(sig, []byte(certPEM), []byte(rekorJSON), body)
	if err != nil {
		return "", err
	}
	if err := p.precheck(b); err != nil {
		return "", err
	}
	res, err := p.verify(b, verify.WithArtifact(bytes.NewReader(body)))
	if err != nil {
		return "", err
	}
	identity := identityOf(res)
	// Only a verified payload is parsed: its claims mean nothing before.
	if err := checkPayload(body, dgst, identity); err != nil {
		return "", err
	}
	return identity, nil
}

// precheck checks, with sigstore-go, the parts of a converted signature whose failure
// sigstore-go reports without saying why: it skips log entries whose SET does not verify and
// then counts too few, and says "leaf certificate verification failed" of a certificate of an
// unknown CA and of one used outside its validity alike. The whole bundle is verified after.
func (p *KeylessPolicy) precheck(b *bundle.Bundle) error {
	entries, err := b.TlogEntries()
	if err != nil {
		return fmt.Errorf("%s: %w", RekorBundleAnnotation, err)
	}
	content, err := b.VerificationContent()
	if err != nil {
		return fmt.Errorf("%s: %w", CertificateAnnotation, err)
	}
	leaf := content.Certificate()
	for _, e := range entries {
		if err := tlog.VerifySET(e, p.trusted.RekorLogs()); err != nil {
			return fmt.Errorf("the signed entry timestamp of %s (the log's promise) does not verify with a transparency log of the trusted root: %w", RekorBundleAnnotation, err)
		}
		// The SET verified: the integrated time is the log's.
		logged := e.IntegratedTime()
		if logged.Before(leaf.NotBefore) || logged.After(leaf.NotAfter) {
			return fmt.Errorf("logged at %s, outside the certificate's validity (%s to %s)", logged.UTC().Format(time.RFC3339), leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		if _, err := verify.VerifyLeafCertificate(logged, leaf, p.trusted); err != nil {
			return fmt.Errorf("the certificate (issuer %q) does not chain to a certificate authority of the trusted root: %w", leaf.Issuer.String(), err)
		}
	}
	return nil
}

// cosign2Bundle converts a cosign 2 keyless signature into the sigstore bundle (v0.1) it
// amounts to: the certificate, the log entry with its promise, and a message signature over the
// payload. Nothing is checked here; sigstore-go checks the bundle.
func cosign2Bundle(sig, certPEM, rekorJSON, payload []byte) (*bundle.Bundle, error) {
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CertificateAnnotation, err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate", CertificateAnnotation)
	}
	var rb rekorBundle
	if err := json.Unmarshal(rekorJSON, &rb); err != nil {
		return nil, fmt.Errorf("%s: %w", RekorBundleAnnotation, err)
	}
	if len(rb.SignedEntryTimestamp) == 0 {
		return nil, fmt.Errorf("%s: no SignedEntryTimestamp, the log's promise that it logged the signature", RekorBundleAnnotation)
	}
	entryBody, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: Payload.body: %w", RekorBundleAnnotation, err)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, fmt.Errorf("%s: Payload.logID: %w", RekorBundleAnnotation, err)
	}
	// The entry's kind and version, which the bundle states beside the body (sigstore-go checks
	// that they agree).
	var kind struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(entryBody, &kind); err != nil {
		return nil, fmt.Errorf("%s: the log entry: %w", RekorBundleAnnotation, err)
	}
	sum := sha256.Sum256(payload)
	b, err := bundle.NewBundle(&protobundle.Bundle{
		MediaType: bundleV01MediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			// The leaf only: the chain comes from the trusted root.
			Content: &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: certs[0].Raw}},
			TlogEntries: []*protorekor.TransparencyLogEntry{{
				LogIndex:          rb.Payload.LogIndex,
				LogId:             &protocommon.LogId{KeyId: logID},
				KindVersion:       &protorekor.KindVersion{Kind: kind.Kind, Version: kind.APIVersion},
				IntegratedTime:    rb.Payload.IntegratedTime,
				InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
				CanonicalizedBody: entryBody,
			}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig,
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("as a sigstore bundle: %w", err)
	}
	return b, nil
}
