// Package cloudstandin runs stand-ins for the clouds' token services and registries over real
// HTTPS on loopback, for tests of spec.provider and --provider without the internet: AWS STS
// (AssumeRoleWithWebIdentity) and ECR (GetAuthorizationToken); a registry front, named as the
// cloud's registry (reached through an HTTP CONNECT proxy, as a machine behind HTTPS_PROXY
// reaches it), that accepts only the tokens the stand-ins issued, for the repositories the
// token's role may read, and forwards to a real registry process. Each stand-in speaks the
// cloud's wire format, as the cloud SDKs send and parse it, and counts what it was asked.
package cloudstandin
