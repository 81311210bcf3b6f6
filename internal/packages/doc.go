// Package packages reconciles Packages and ClusterPackages: each pass resolves spec.image
// (a tag, a semver range, a digest) to a digest, verifies it, pulls and renders the package
// with its configuration (spec.config over spec.configFrom) and environment, checks its
// constraints and dependencies (spec.dependsOn, readyExpr in CEL), and hands the phases to the
// apply pass of internal/applier, in the lifecycle of internal/reconciler. Rendered packages
// are kept in a bounded cache; RenderPackage previews a render as the reconciler would make it
// (pkgsync diff).
//
// It imports the shared packages (internal/setup, internal/applier, internal/verify,
// internal/reconciler, internal/mirrors) and no other kind.
package packages
