package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func newPullCmd() *cobra.Command {
	var (
		registry registryOptions
		out      outputOptions
		dir      string
		// checkIntoSpelling refuses --into and its old spelling --output at once.
		checkIntoSpelling func() error
	)
	cmd := &cobra.Command{
		Use:   "pull REF --into DIR",
		Short: "Pull a package image into a directory",
		Long: `Pull downloads the package REF names (a tag, a digest, or both) and writes its files to DIR,
which must be empty or not exist. Both pkgsync package images and Package Operator images
(whose package lies under package/) are read; digests are verified and the unpacked files are
checked against the size and path limits.`,
		Example: `  pkgsync pull registry.example.com/team/my-package:v1 --into ./my-package`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("pull takes one reference, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkIntoSpelling(); err != nil {
				return err
			}
			if err := out.validate(); err != nil {
				return err
			}
			if dir == "" {
				return usageError("pull needs --into DIR")
			}
			refs, err := parseReferences(args[0])
			if err != nil {
				return err
			}
			if err := ensureEmptyDir(dir); err != nil {
				return err
			}
			client, err := registry.client(cmd.ErrOrStderr(), refs...)
			if err != nil {
				return err
			}
			artifact, err := client.Pull(cmd.Context(), refs[0], nil)
			if err != nil {
				return err
			}
			if err := os.CopyFS(dir, artifact.FS); err != nil {
				return fmt.Errorf("write %s: %w", dir, err)
			}
			if out.format == outputDigest {
				fmt.Fprintln(cmd.OutOrStdout(), artifact.Digest)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Pulled %s into %s\n", refs[0].WithDigest(artifact.Digest), dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "into", "", "Directory to write the package to (required; empty or absent)")
	registry.ApplyFlags(cmd.Flags())
	registry.overrides.ApplyFlags(cmd.Flags())
	out.ApplyFlags(cmd.Flags())
	checkIntoSpelling = renameFlag(cmd, "into", "output", "")
	return cmd
}

// ensureEmptyDir creates dir, or checks that it is an empty directory, so a pull never mixes
// two packages.
func ensureEmptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err == nil {
			return fmt.Errorf("%s is not empty: pull into an empty or new directory", dir)
		}
		return fmt.Errorf("read %s: %w", dir, err)
	}
	return nil
}
