// Package setup holds what Setup (internal/controller) makes once and hands to the setup of
// every kind (Services): the manager, the options, the source and hosted clients, metrics and
// recorder, the apply pass and the signature verifier, and the watches every kind's controller
// is built with: its own spec changes, TrustPolicies and their Secrets, registry wakes, and the
// hosted inputs of a hosted-control-plane namespace (its connector Secret, its HostedCluster,
// its hosted API server answering again).
//
// It imports the shared packages (internal/reconciler, internal/applier, internal/verify)
// and nothing of the kinds.
package setup
