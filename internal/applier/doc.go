// Package applier is what the kinds that apply objects (Package, ClusterPackage and both
// ObjectDeployment kinds) share, around the apply engine: one apply pass for one resource
// (Applier.Apply, with its management and hosted targets, confinement and impersonation), what
// is behind a hosted-control-plane namespace and the gate of its hosted phases (HostedBehind),
// the configuration a resource reads from ConfigMaps and Secrets (ReadConfig), how a pass is
// concluded into status, conditions and outcome (Conclude, with the inventory and history), the
// render options templates see (RenderOptions), and the teardown of the inventory on deletion
// (TeardownInventory). The fleet uses it for its preflight renders and hosted gating.
//
// It imports internal/reconciler, and nothing of the kinds.
package applier
