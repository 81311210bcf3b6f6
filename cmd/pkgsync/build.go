package main

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/source"
)

// buildFlags set the metadata a build records, for build and for push of a directory.
type buildFlags struct {
	name, version    string
	source, revision string
	created          bool
	annotations      []string
}

func (f *buildFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "Package name (default: metadata.name of manifest.yaml)")
	fs.StringVar(&f.version, "version", "", "Package version, recorded as org.opencontainers.image.version")
	fs.StringVar(&f.source, "source", "", "Source repository URL, recorded as org.opencontainers.image.source")
	fs.StringVar(&f.revision, "revision", "", "Source revision, recorded as org.opencontainers.image.revision")
	fs.BoolVar(&f.created, "created", false, "Record the build time as org.opencontainers.image.created (the digest then differs per build)")
	fs.StringArrayVar(&f.annotations, "annotation", nil, "Extra manifest annotation KEY=VALUE (repeatable)")
}

func (f *buildFlags) options() (source.BuildOptions, error) {
	opts := source.BuildOptions{
		Name: f.name, Version: f.version, Source: f.source, Revision: f.revision,
		Validate: validatePackage,
	}
	if f.created {
		opts.Created = time.Now()
	}
	for _, a := range f.annotations {
		key, value, ok := strings.Cut(a, "=")
		if !ok || key == "" {
			return opts, usageError("--annotation %q: want KEY=VALUE", a)
		}
		if opts.Annotations == nil {
			opts.Annotations = map[string]string{}
		}
		opts.Annotations[key] = value
	}
	return opts, nil
}

// validatePackage checks a package directory before it is built.
//
// TODO(render): call render.Validate here. It is not wired yet because it renders with an empty
// configuration, which fails for packages whose schema requires values; it needs a mode that
// checks structure (manifest, phases, templates parse) without a configuration. Until then a
// build checks the manifest's kind and name, the files and the limits, not the objects.
func validatePackage(fs.FS) error { return nil }

func newBuildCmd() *cobra.Command {
	var (
		meta     buildFlags
		registry registryOptions
		out      outputOptions
		tags     []string
		push     bool
		output   string
	)
	cmd := &cobra.Command{
		Use:   "build DIR --tag REF [--tag REF...] [--push] [--output FILE.tar]",
		Short: "Build a package image from a directory",
		Long: `Build packs a package directory (manifest.yaml at its top) into an OCI artifact. The same
directory and flags give the same digest. Dot-files are skipped; symbolic links are errors.

With --push the image goes to every --tag; with --output it is written as an OCI image layout
archive that "pkgsync push FILE.tar REF" uploads later.`,
		Example: `  pkgsync build ./my-package --tag registry.example.com/team/my-package:v1 --push
  pkgsync build ./my-package --tag registry.example.com/team/my-package:v1 --output my-package.tar`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("build takes one package directory, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			refs, err := parseReferences(tags...)
			if err != nil {
				return err
			}
			if push && len(refs) == 0 {
				return usageError("--push needs at least one --tag")
			}
			opts, err := meta.options()
			if err != nil {
				return err
			}
			img, err := source.Build(args[0], opts)
			if err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			text := out.format == outputText
			if text {
				fmt.Fprintf(stdout, "Built %s %s\n", img.Name, img.Digest)
			}
			if output != "" {
				if err := writeLayout(cmd, img, refs, output); err != nil {
					return err
				}
				if text {
					fmt.Fprintf(stdout, "Wrote %s\n", output)
				}
			}
			if push {
				if err := pushImage(cmd, &registry, img, refs, text); err != nil {
					return err
				}
			}
			if !text {
				fmt.Fprintln(stdout, img.Digest)
			}
			return nil
		},
	}
	flags := cmd.Flags()
	flags.StringArrayVarP(&tags, "tag", "t", nil, "Reference REGISTRY/REPOSITORY:TAG to push to or record in --output (repeatable)")
	flags.BoolVar(&push, "push", false, "Push the image to every --tag")
	flags.StringVarP(&output, "output", "o", "", "Write the image as an OCI image layout tar archive to this file")
	meta.ApplyFlags(flags)
	registry.ApplyFlags(flags)
	out.ApplyFlags(flags)
	return cmd
}

// writeLayout writes img to file as an OCI layout archive, tagged with the refs' tags.
func writeLayout(cmd *cobra.Command, img *source.Image, refs []source.Reference, file string) (err error) {
	var tags []string
	for _, ref := range refs {
		if ref.Tag != "" {
			tags = append(tags, ref.Tag)
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", file, cerr)
		}
	}()
	return img.WriteLayout(cmd.Context(), f, tags)
}

// pushImage pushes img to refs and, for text output, lists what was pushed.
func pushImage(cmd *cobra.Command, registry *registryOptions, img *source.Image, refs []source.Reference, text bool) error {
	client, err := registry.client(cmd.ErrOrStderr(), refs...)
	if err != nil {
		return err
	}
	pushed, err := client.Push(cmd.Context(), img, refs, nil)
	if err != nil {
		return err
	}
	if text {
		for _, ref := range pushed {
			fmt.Fprintf(cmd.OutOrStdout(), "Pushed %s\n", ref)
		}
	}
	return nil
}
