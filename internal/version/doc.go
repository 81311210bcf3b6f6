// Package version holds the pkgsync version, commit and default controller image, stamped at
// build time.
package version
