package intoto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Formats and types that cosign and admission policies know.
const (
	// SPDXMediaType is the media type of an SBOM in SPDX 2.3 JSON.
	SPDXMediaType = "application/spdx+json"
	// MediaType is the media type of an in-toto statement.
	MediaType = "application/vnd.in-toto+json"
	// SPDXPredicateType is the predicate type of an in-toto statement holding an SPDX document
	// (cosign attest --type spdxjson).
	SPDXPredicateType = "https://spdx.dev/Document"
	// ProvenancePredicateType is SLSA provenance v1 (cosign attest --type slsaprovenance1).
	ProvenancePredicateType = "https://slsa.dev/provenance/v1"
)

// SBOMStatement wraps an SPDX document in an in-toto statement about the image digest (what
// cosign attest --type spdxjson signs).
func SBOMStatement(sbom []byte, subject, digest string) ([]byte, error) {
	algorithm, hexDigest, ok := strings.Cut(digest, ":")
	if !ok || algorithm != "sha256" {
		return nil, fmt.Errorf("SBOM statement: image digest %q is not sha256:HEX", digest)
	}
	var doc map[string]any
	if err := json.Unmarshal(sbom, &doc); err != nil {
		return nil, fmt.Errorf("SBOM statement: the SBOM is not JSON: %w", err)
	}
	pred, err := structpb.NewStruct(doc)
	if err != nil {
		return nil, fmt.Errorf("SBOM statement: %w", err)
	}
	return Statement(subject, hexDigest, SPDXPredicateType, pred)
}

// Statement is an in-toto statement v1 about one image (subject, its sha256 hexDigest), in
// canonical JSON: keys sorted, indented, no HTML escaping. protojson's own output is
// deliberately unstable (it varies its white space), so it is decoded and encoded again.
func Statement(subject, hexDigest, predicateType string, pred *structpb.Struct) ([]byte, error) {
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: subject, Digest: map[string]string{"sha256": hexDigest}}},
		PredicateType: predicateType,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("in-toto statement: %w", err)
	}
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	return Canonical(raw)
}

// Canonical re-encodes JSON with sorted keys, two-space indentation and no HTML escaping,
// ending in a newline: the same document always gives the same bytes.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
