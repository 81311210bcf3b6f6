//go:build tools

// Package tools pins KWOK, whose controller simulates the nodes (and the pods on them) of the
// test environment's clusters (test/testenv.StartCluster), built by `make tools`.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
