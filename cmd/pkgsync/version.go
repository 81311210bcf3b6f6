package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/internal/version"
)

// versionInfo is what `pkgsync version` prints.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Image is the controller image `pkgsync install` installs without --image.
	Image    string `json:"image"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// currentVersion describes this binary.
func currentVersion() versionInfo {
	return versionInfo{
		Version:  version.Version,
		Commit:   version.Revision(),
		Image:    version.Image(),
		Go:       runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// text is what `pkgsync version` and `pkgsync --version` print.
func (info versionInfo) text() string {
	commit := info.Commit
	if commit == version.Unknown {
		commit += " (" + unknownCommitHint + ")"
	}
	return fmt.Sprintf("version:  %s\ncommit:   %s\nimage:    %s\ngo:       %s\nplatform: %s\n",
		info.Version, commit, info.Image, info.Go, info.Platform)
}

// unknownCommitHint says why a binary carries no revision and how to build one that does.
const unknownCommitHint = "this binary records none: make build stamps it; a plain go build records it only in a git clone's own " +
	"working tree, not in a linked git worktree (golang/go#58218), not with -buildvcs=false (see go env GOFLAGS), not with go run"

// addVersionFlag gives root --version, cobra's version flag, printing what `pkgsync version`
// prints. The flag is defined here rather than by cobra so that it has no -v shorthand (kubectl's
// -v is the log level) and says what it prints.
func addVersionFlag(root *cobra.Command) {
	root.Version = version.Version
	root.Flags().Bool("version", false, `Print what "pkgsync version" prints`)
	root.SetVersionTemplate(`{{ versionText }}`)
}

func init() {
	cobra.AddTemplateFunc("versionText", func() string { return currentVersion().text() })
}

func newVersionCmd() *cobra.Command {
	var output *outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the pkgsync version, commit, and the controller image it installs",
		Long: `Version prints the version and commit of this binary and the controller image that
"pkgsync install" installs by default (the image of the same release).

The commit is the one "make build" stamps (git rev-parse HEAD). A plain "go build" records one
only in a git clone's own working tree: in a linked git worktree the go command finds no
repository (golang/go#58218) and records none, or, in a worktree inside the clone, the clone's
commit; -buildvcs=false (also from go env GOFLAGS) and go run record none. Without one it says
"unknown".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.check(); err != nil {
				return err
			}
			info := currentVersion()
			if output.document() {
				return output.writeDocument(cmd, "the version", info)
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), info.text())
			return err
		},
	}
	output = addOutputFlag(cmd.Flags(), outputText)
	return cmd
}
