// Package controller wires pkgsync's reconcilers into a controller-runtime manager: Setup
// makes once what every kind shares (internal/setup's Services: the apply pass, the signature
// verifier, metrics, the hosted prober) and calls the setup of each kind, and the manager
// options it relies on (CacheOptions, ClientOptions, shard label keys and the leader election
// ID) are here. It is the one package that names every kind; nothing imports it but the binary
// and the tests that start a controller.
//
// The packages below it, each importing only those listed after it:
//   - internal/packages (Package, ClusterPackage), internal/objectdeployment (both
//     ObjectDeployment kinds), internal/fleet (HostedClusterPackage) with its pure planner
//     internal/fleet/rollout: one package per kind, none importing another;
//   - internal/setup: what every kind's setup is handed;
//   - internal/applier: the apply pass and its conclusion, shared by the kinds that apply;
//   - internal/verify: signature verification and TrustPolicies;
//   - internal/reconciler: the one lifecycle, status writer, outcome and requeue rule;
//   - internal/wakes and internal/mirrors, which import none of these.
package controller
