//go:build tools

// Package tools pins the Kubernetes components the tests run, built by `make tools`:
// kube-apiserver (envtest), and kube-controller-manager and kube-scheduler (the clusters of
// test/testenv.StartCluster).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
