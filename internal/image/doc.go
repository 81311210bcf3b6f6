// Package image builds the pkgsync controller image without a container engine: a reproducible
// multi-platform OCI image index of static binaries on a base assembled from scratch, with its
// SBOM and SLSA provenance as attachments, written as an OCI layout archive. It is release
// tooling: hack/release-image (make image) uses it, and the pkgsync binary does not link it
// (cmd/pkgsync's TestBinaryLinksNoReleaseTooling).
package image
