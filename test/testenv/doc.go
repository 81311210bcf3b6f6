// Package testenv starts the real components that pkgsync's tests and demo run against: kube-apiserver
// and etcd control planes (envtest), a CNCF Distribution registry process, and zot (StartZot, or
// $PKGSYNC_TEST_REGISTRY=zot) where its binary was built from ../shared/zot.
package testenv
