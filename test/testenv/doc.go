// Package testenv starts the real components that pkgsync's tests, benchmark and demo run
// against, each from a binary `make tools` builds from the module proxy into bin/:
//
//   - ControlPlane: kube-apiserver and etcd alone (envtest). Nothing writes the status of
//     Deployments or finalizes namespaces, so a test can write what a controller would, at the
//     moment it chooses. Most of the e2e suite runs here, and so do hosted clusters everywhere.
//   - Cluster: a ControlPlane with kube-controller-manager (garbage collector, namespace
//     lifecycle, Deployments, ReplicaSets, Jobs and their TTL, ClusterRole aggregation,
//     autoscaling, ...), kube-scheduler and KWOK, which simulates nodes and reports the pods
//     placed there running (no containers run). It is the management cluster of `make demo` and
//     `make bench`, and of the e2e tests named TestRealCluster* (test/e2e/cluster_test.go), whose
//     behaviour depends on those controllers: rollouts, garbage collection, namespace deletion,
//     fleet deletion under each cascade, Jobs deleted by their TTL, writes on an idle cluster.
//   - Registry: a CNCF Distribution registry process, and zot (StartZot, or
//     $PKGSYNC_TEST_REGISTRY=zot) where its binary was built from ../shared/zot.
//
// Every process runs in its own process group and is killed with the test process.
package testenv
