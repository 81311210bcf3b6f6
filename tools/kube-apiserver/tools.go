//go:build tools

// Package tools pins kube-apiserver, built for envtest by `make tools`.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
