// Package controller holds the reconcilers that wire source, render and apply together for
// Package, ClusterPackage, ObjectDeployment and ClusterObjectDeployment resources, and the
// HostedClusterPackage reconciler, which keeps one member Package per selected hosted cluster.
// TrustPolicies have no reconciler: signature verification reads them.
//
// The files are on three floors; a file refers only to its own floor and those below it, never
// to another kind's files (TestFloors keeps it so, docs/architecture.md draws it):
//   - each kind's own files, named for it: package_*.go (Package and ClusterPackage),
//     objectdeployment_*.go (both ObjectDeployment kinds), fleet_*.go (HostedClusterPackage);
//   - apply_*.go, what the kinds that apply objects share: one apply pass (applier), the gate
//     and targets of its hosted phases, its conclusion into status and outcome (conclude), and
//     the teardown on deletion;
//   - the lifecycle every kind runs, in the other files: one Reconcile (lifecycle.go) that runs
//     each kind's reconciler.Steps, one status writer (report.go, status_patch.go), one
//     observedGeneration rule, one outcome → conditions mapping (outcome.go, reconciler.MarkOutcome), one
//     error → reason mapping (reasons.go, reconciler.ReasonFor), and the verification, credentials,
//     requeue and metrics every kind uses.
//
// Setup (setup.go) makes what the kinds share and calls each kind's setup.
package controller
