// Package docs reads the pkgsync command lines the README, docs/ and the examples' READMEs show in
// their code blocks, for the tests that parse them with the CLI's flag sets (cmd/pkgsync) and run
// those that need a cluster or a registry (test/e2e): the docs describe what the CLI does.
package docs
