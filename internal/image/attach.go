package image

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"pkgsync.dev/pkgsync/internal/intoto"
)

// CosignSBOMMediaType is the layer media type `cosign attach sbom --type spdxjson` gives an
// SPDX JSON document under the sha256-HEX.sbom tag.
const CosignSBOMMediaType = "text/spdx+json"

// Attachment is a manifest stored next to the image: an OCI 1.1 referrer (its subject is the
// image index, found through the referrers API) or a manifest under one of cosign's tags.
type Attachment struct {
	// Tag is the tag it is stored under, such as sha256-HEX.sbom; empty for a referrer, which
	// is pushed by digest.
	Tag string
	// ArtifactType is the manifest's artifact type (referrers only).
	ArtifactType string
	// Manifest is the OCI image manifest, and Descriptor describes it.
	Manifest   []byte
	Descriptor ocispec.Descriptor
	// Blobs are the config and layer, by digest.
	Blobs map[digest.Digest][]byte
}

// Attachments are the SBOM and the provenance statement attached to the image index subject,
// unsigned (signatures are made at release, `pkgsync sign --sbom --provenance`): an OCI
// referrer each (artifact types application/spdx+json and application/vnd.in-toto+json), and
// the SBOM under cosign's tag sha256-HEX.sbom, as `cosign attach sbom` stores it. Their only
// time is created (the commit time): the same inputs give the same manifests.
func Attachments(subject ocispec.Descriptor, sbom, provenance []byte, created time.Time) ([]Attachment, error) {
	ts := created.UTC().Format(time.RFC3339)
	subject = ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	sbomRef, err := referrer(subject, intoto.SPDXMediaType, sbom, map[string]string{ocispec.AnnotationCreated: ts})
	if err != nil {
		return nil, err
	}
	provRef, err := referrer(subject, intoto.MediaType, provenance, map[string]string{
		ocispec.AnnotationCreated: ts, "in-toto.io/predicate-type": intoto.ProvenancePredicateType,
	})
	if err != nil {
		return nil, err
	}
	tagged, err := cosignAttachment(subject.Digest, CosignSBOMMediaType, sbom)
	if err != nil {
		return nil, err
	}
	return []Attachment{sbomRef, provRef, tagged}, nil
}

// referrer is an OCI 1.1 artifact manifest: the empty config, one layer, subject the image.
func referrer(subject ocispec.Descriptor, artifactType string, data []byte, annotations map[string]string) (Attachment, error) {
	layer := ocispec.Descriptor{MediaType: artifactType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       ocispec.DescriptorEmptyJSON,
		Layers:       []ocispec.Descriptor{layer},
		Subject:      &subject,
		Annotations:  annotations,
	}
	a, err := attachment(m, map[digest.Digest][]byte{layer.Digest: data, ocispec.DescriptorEmptyJSON.Digest: ocispec.DescriptorEmptyJSON.Data})
	if err != nil {
		return a, fmt.Errorf("attach %s: %w", artifactType, err)
	}
	a.ArtifactType = artifactType
	a.Descriptor.ArtifactType = artifactType
	return a, nil
}

// cosignAttachment is a manifest as `cosign attach` writes under sha256-HEX.<kind>: one layer of
// the attachment, and a config listing it.
func cosignAttachment(subject digest.Digest, mediaType string, data []byte) (Attachment, error) {
	layer := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	config, err := json.Marshal(ocispec.Image{RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layer.Digest}}})
	if err != nil {
		return Attachment{}, err
	}
	configDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(config), Size: int64(len(config))}
	a, err := attachment(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    configDesc,
		Layers:    []ocispec.Descriptor{layer},
	}, map[digest.Digest][]byte{layer.Digest: data, configDesc.Digest: config})
	if err != nil {
		return a, fmt.Errorf("attach %s: %w", mediaType, err)
	}
	a.Tag = CosignTag(subject, "sbom")
	return a, nil
}

// CosignTag is the tag cosign stores an attachment of kind (sig, att, sbom) of digest under:
// sha256-HEX.kind.
func CosignTag(d digest.Digest, kind string) string {
	return strings.Replace(d.String(), ":", "-", 1) + "." + kind
}

func attachment(m ocispec.Manifest, blobs map[digest.Digest][]byte) (Attachment, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return Attachment{}, err
	}
	return Attachment{
		Manifest:   raw,
		Descriptor: ocispec.Descriptor{MediaType: m.MediaType, Digest: digest.FromBytes(raw), Size: int64(len(raw))},
		Blobs:      blobs,
	}, nil
}
