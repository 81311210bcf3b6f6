// Package fleet reconciles HostedClusterPackages: it selects hosted clusters, keeps one member
// Package per selected cluster in its hosted-control-plane namespace (with the pull and verify
// Secrets it copies there), resolves and verifies the fleet's target revision, and rolls it out
// partition by partition as internal/fleet/rollout decides, with preflight renders, windows,
// soak, failure budget and rollback; on deletion it deletes or lets go of its members as
// spec.deletionPolicy says. PreflightFleet gives pkgsync fleet plan the same preflight.
//
// It imports internal/fleet/rollout and the shared packages (internal/setup, internal/applier,
// internal/verify, internal/reconciler) and no other kind.
package fleet
