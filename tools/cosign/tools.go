//go:build tools

// Package tools pins the cosign CLI that interoperability tests run against pkgsync signatures.
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"
