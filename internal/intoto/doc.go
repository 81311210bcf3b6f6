// Package intoto writes in-toto statements v1 about an image digest in canonical JSON, the
// same document always the same bytes (Statement, SBOMStatement), and names the predicate and
// media types that cosign and admission policies know. `pkgsync sign` signs such statements as
// attestations; the release tooling (internal/image) writes the image's SBOM and provenance
// with it. It imports nothing of pkgsync.
package intoto
