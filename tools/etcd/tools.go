//go:build tools

// Package tools pins etcd, built for envtest by `make tools`.
package tools

import _ "go.etcd.io/etcd/server/v3"
