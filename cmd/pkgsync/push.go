package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/source"
)

func newPushCmd() *cobra.Command {
	var (
		meta     buildFlags
		registry registryOptions
		out      outputOptions
	)
	cmd := &cobra.Command{
		Use:   "push DIR|FILE.tar REF",
		Short: "Push a package directory or image archive to a registry",
		Long: `Push uploads a package to REF (REGISTRY/REPOSITORY:TAG). A directory is built first, as
"pkgsync build" does; a FILE.tar is an OCI image layout archive written by "pkgsync build --archive", or the
controller image's archive (make image): what it holds beside the image and about it (the
SBOM and provenance, as OCI referrers and under cosign's sha256-HEX.sbom tag) is pushed too.`,
		Example: `  pkgsync push ./my-package registry.example.com/team/my-package:v1
  pkgsync push my-package.tar registry.example.com/team/my-package:v1 --output-format digest`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError("push takes a package directory or archive and a reference, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			refs, err := parseTagReferences("", args[1])
			if err != nil {
				return err
			}
			info, err := os.Stat(args[0])
			if err != nil {
				return fmt.Errorf("push: %w", err)
			}
			var img *source.Image
			if info.IsDir() {
				opts, err := meta.options()
				if err != nil {
					return err
				}
				img, err = source.Build(args[0], opts)
				if err != nil {
					return err
				}
			} else {
				img, err = source.LoadLayout(cmd.Context(), args[0])
				if err != nil {
					return err
				}
			}
			text := out.format == outputText
			if err := pushImage(cmd, &registry, img, refs, text); err != nil {
				return err
			}
			if err := pushAttachments(cmd, &registry, refs, img.Attachments, text); err != nil {
				return err
			}
			if !text {
				fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
			}
			return nil
		},
	}
	meta.ApplyFlags(cmd.Flags())
	registry.ApplyFlags(cmd.Flags())
	out.ApplyFlags(cmd.Flags())
	return cmd
}

// pushAttachments pushes the attachments next to the image in the repository of every ref.
func pushAttachments(cmd *cobra.Command, registry *registryOptions, refs []source.Reference, attachments []source.Attachment, text bool) error {
	if len(attachments) == 0 {
		return nil
	}
	client, err := registry.client(cmd.ErrOrStderr(), refs...)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, ref := range refs {
		if seen[ref.Name()] {
			continue
		}
		seen[ref.Name()] = true
		if err := client.PushAttachments(cmd.Context(), ref, attachments, nil); err != nil {
			return err
		}
		if text {
			fmt.Fprintf(cmd.OutOrStdout(), "Attached %d manifest(s) about %s in %s\n", len(attachments), refs[0].Name(), ref.Name())
		}
	}
	return nil
}
