//go:build tools

// Package tools pins the CNCF Distribution registry used by tests and the demo.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
