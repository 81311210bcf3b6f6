// Package version holds the pkgsync version, stamped at build time.
package version

// Version is set with -ldflags "-X pkgsync.dev/pkgsync/internal/version.Version=...".
var Version = "v0.0.0-dev"
