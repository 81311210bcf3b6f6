// Command release-image builds pkgsync's controller image for a release, reproducibly and
// without a container engine: the static binary cross-compiled per platform, an OCI image
// index of images made from scratch, the SBOM and SLSA provenance attached, all written to an
// OCI image layout archive (internal/image does the work). `make image` and `make release` run
// it; `pkgsync push` pushes the archive with its attachments, and `pkgsync sign` signs them.
// It is release tooling, not part of the pkgsync binary.
package main
