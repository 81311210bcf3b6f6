// Package controller holds the reconcilers that wire source, render and apply together for
// Package, ClusterPackage, ObjectDeployment and ClusterObjectDeployment resources, and the
// HostedClusterPackage reconciler, which keeps one member Package per selected hosted cluster.
// Every kind runs one lifecycle (lifecycle.go) with its own kindSteps: one status writer
// (status_patch.go), one observedGeneration rule and one outcome → conditions mapping
// (conclude.go), one error → reason mapping (status.go, reasonFor).
package controller
