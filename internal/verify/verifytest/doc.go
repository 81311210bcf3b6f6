// Package verifytest gives tests of verification and of the kinds that verify a registry with
// a package signed by one key and an unsigned one, the Secrets of two keys in a tenant's and in
// the controller's namespace, and the source client that reads them (NewFixture).
package verifytest
