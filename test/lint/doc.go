// Package lint checks conventions of the project's tests that golangci-lint cannot express.
package lint
