// Package image builds the pkgsync controller image without a container engine: a reproducible
// multi-platform OCI image index of static binaries on a base assembled from scratch.
package image
