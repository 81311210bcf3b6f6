package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/source"
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
checked against the size and path limits. A pull that fails removes the directories it created
for DIR, or what it wrote into a DIR that was there (empty), never DIR itself.`,
		Example: `  pkgsync pull registry.example.com/team/my-package:v1 --into ./my-package`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("pull takes one reference, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) (err error) {
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
			undo, err := ensureEmptyDir(dir)
			if err != nil {
				return err
			}
			defer func() {
				if err != nil {
					err = errors.Join(err, undo())
				}
			}()
			digest, err := pullInto(cmd, &registry, refs[0], dir)
			if err != nil {
				return err
			}
			if out.format == outputDigest {
				fmt.Fprintln(cmd.OutOrStdout(), digest)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Pulled %s into %s\n", refs[0].WithDigest(digest), dir)
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

// pullInto pulls ref and writes its files to dir; it returns the digest pulled.
func pullInto(cmd *cobra.Command, registry *registryOptions, ref source.Reference, dir string) (string, error) {
	client, err := registry.client(cmd.ErrOrStderr(), ref)
	if err != nil {
		return "", err
	}
	artifact, err := client.Pull(cmd.Context(), ref, nil)
	if err != nil {
		return "", err
	}
	if err := os.CopyFS(dir, artifact.FS); err != nil {
		return "", fmt.Errorf("write %s: %w", dir, err)
	}
	return artifact.Digest, nil
}

// ensureEmptyDir creates dir, or checks that it is an empty directory, so a pull never mixes
// two packages. undo, for a pull that fails, takes back what the pull left: the directories
// ensureEmptyDir created (dir and any missing parents), or, in a directory that was there
// (empty), the files written into it; never the directory itself.
func ensureEmptyDir(dir string) (undo func() error, err error) {
	created := firstMissing(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	undo = func() error {
		if created != "" {
			return os.RemoveAll(created)
		}
		return emptyDir(dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, fmt.Errorf("%s is not empty: pull into an empty or new directory", dir)
		}
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	return undo, nil
}

// firstMissing is the outermost directory of path (path itself included) that does not exist,
// the one MkdirAll(path) creates first; "" when path exists.
func firstMissing(path string) string {
	missing := ""
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return missing
		}
		missing = p
		if filepath.Dir(p) == p {
			return missing
		}
	}
}

// emptyDir removes what dir holds, leaving dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("remove what the failed pull wrote to %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove what the failed pull wrote to %s: %w", dir, err)
		}
	}
	return nil
}
