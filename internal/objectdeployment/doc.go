// Package objectdeployment reconciles ObjectDeployments and ClusterObjectDeployments, Package
// Operator's kinds: their phases are inline in spec.template, so a pass renders nothing and
// hands them to the apply pass of internal/applier, in the lifecycle of internal/reconciler.
//
// It imports the shared packages (internal/setup, internal/applier, internal/reconciler) and no
// other kind.
package objectdeployment
