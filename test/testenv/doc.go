// Package testenv starts the real components that pkgsync's tests and demo run against: kube-apiserver
// and etcd control planes (envtest) and a CNCF Distribution registry process.
package testenv
