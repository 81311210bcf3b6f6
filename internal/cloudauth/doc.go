// Package cloudauth gets registry credentials from a cloud's workload identity (spec.provider aws,
// azure, gcp): the controller's own identity, or a resource's ServiceAccount through a
// TokenRequest, exchanged for Amazon ECR, Azure Container Registry or Google Artifact Registry
// credentials with github.com/fluxcd/pkg/auth, kept in memory until shortly before they expire
// and keyed by who could obtain them, so that nothing is served to a caller that could not. It
// imports source for the credential type and nothing of the kinds.
package cloudauth
