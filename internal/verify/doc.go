// Package verify decides whether a resource may use a package digest: the TrustPolicies that
// cover its image, then its own spec.verify (Verifier), with keys or a trusted root read from
// Secrets on every reconcile and verdicts remembered per digest, key set and interval; the
// watches that wake the resources a TrustPolicy or its Secret covers; and the pull credentials
// a resource names (ReadPullCredentials). It imports internal/reconciler for reasons and
// errors, and nothing of the kinds.
package verify
