package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// buildFlags set the metadata a build records, for build and for push of a directory.
type buildFlags struct {
	name, version    string
	source, revision string
	created          bool
	annotations      []string
	// config is a configuration file the validation before the build renders with.
	config string
}

func (f *buildFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "Package name (default: metadata.name of manifest.yaml)")
	fs.StringVar(&f.version, "version", "", "Package version, recorded as org.opencontainers.image.version and shown beside the digest in Package and fleet status")
	fs.StringVar(&f.source, "source", "", "Source repository URL, recorded as org.opencontainers.image.source")
	fs.StringVar(&f.revision, "revision", "", "Source revision, recorded as org.opencontainers.image.revision")
	fs.BoolVar(&f.created, "created", false, "Record the build time as org.opencontainers.image.created (the digest then differs per build)")
	fs.StringArrayVar(&f.annotations, "annotation", nil, "Extra manifest annotation KEY=VALUE (repeatable)")
	fs.StringVar(&f.config, "config", "", "Configuration file (YAML or JSON object) to validate the package with; "+
		"without it the schema's defaults are used and required values may be missing")
}

func (f *buildFlags) options() (source.BuildOptions, error) {
	opts := source.BuildOptions{Name: f.name, Version: f.version, Source: f.source, Revision: f.revision, BuilderVersion: version.Version}
	var config []byte
	if f.config != "" {
		var err error
		if config, err = os.ReadFile(f.config); err != nil {
			return opts, fmt.Errorf("read --config: %w", err)
		}
	}
	opts.Validate = func(fsys fs.FS) error { return validatePackage(fsys, config) }
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
	// Refused here, as a usage error, rather than by the build: Packages and fleets would not
	// show it (source.CleanVersion).
	versions := []struct{ flag, value string }{{"--version", f.version}, {"--annotation " + ocispec.AnnotationVersion, opts.Annotations[ocispec.AnnotationVersion]}}
	for _, v := range versions {
		if v.value != "" && source.CleanVersion(v.value) == "" {
			return opts, usageError("%s %q: a version is at most %d bytes of printable characters, without space at either end (status and kubectl would not show it)",
				v.flag, v.value, source.MaxVersionLength)
		}
	}
	return opts, nil
}

// validatePackage checks the structure of a package directory before it is built: manifest,
// configuration schema, phases, object files, kustomizations and templates. It renders with
// config (or the schema's defaults); values the schema requires may be missing, since the
// configuration belongs to whoever installs the package.
func validatePackage(fsys fs.FS, config []byte) error {
	// Build has no context to pass; validation reads only the directory.
	return render.ValidateStructure(context.Background(), fsys, render.Options{Config: config})
}

func newBuildCmd() *cobra.Command {
	o := &buildOptions{}
	cmd := &cobra.Command{
		Use:   "build DIR --tag REF [--tag REF...] [--push] [--archive FILE.tar]",
		Short: "Build a package image from a directory",
		Long: `Build packs a package directory (manifest.yaml at its top) into an OCI artifact. The same
directory and flags give the same digest. Dot-files are skipped; symbolic links are errors.

The package is validated first, as "pkgsync validate" does, with the configuration of --config
or the schema's defaults; configuration values the schema requires may be missing. Templates are
executed only when the configuration is complete, and parsed otherwise.

With --push the image goes to every --tag (REGISTRY/REPOSITORY:TAG: a reference without a tag is
refused, not pushed as :latest); with --archive it is written as an OCI image layout
archive that "pkgsync push FILE.tar REF" uploads later. With --sign --key cosign.key the pushed
image is signed as "pkgsync sign" does (the key's password from $COSIGN_PASSWORD). Without
--push or --archive nothing is written: build prints the digest the image would have.`,
		Example: `  pkgsync build ./my-package --tag registry.example.com/team/my-package:v1 --push
  pkgsync build ./my-package --tag registry.example.com/team/my-package:v1 --archive my-package.tar
  pkgsync build ./my-package --tag registry.example.com/team/my-package:v1 --push --sign --key cosign.key`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("build takes one package directory, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	flags := cmd.Flags()
	flags.StringArrayVarP(&o.tags, "tag", "t", nil, "Reference REGISTRY/REPOSITORY:TAG to push to or record in --archive (repeatable)")
	flags.BoolVar(&o.push, "push", false, "Push the image to every --tag")
	flags.StringVar(&o.archive, "archive", "", "Write the image as an OCI image layout tar archive to this file")
	flags.BoolVar(&o.sign, "sign", false, "Sign the pushed image with --key, as \"pkgsync sign\" does")
	o.keyFlags.ApplyFlags(flags)
	o.meta.ApplyFlags(flags)
	o.registry.ApplyFlags(flags)
	o.out.ApplyFlags(flags)
	o.checkArchiveSpelling = renameFlag(cmd, "archive", "output", "")
	return cmd
}

// buildOptions are build's flags.
type buildOptions struct {
	meta     buildFlags
	registry registryOptions
	out      outputOptions
	tags     []string
	push     bool
	archive  string
	sign     bool
	keyFlags signingKeyFlags
	// checkArchiveSpelling refuses --archive and its old spelling --output at once.
	checkArchiveSpelling func() error
}

// run builds the package directory dir and pushes, saves and signs the image as the flags say.
func (o *buildOptions) run(cmd *cobra.Command, dir string) error {
	if err := o.checkArchiveSpelling(); err != nil {
		return err
	}
	if err := o.out.validate(); err != nil {
		return err
	}
	refs, err := parseTagReferences("--tag ", o.tags...)
	if err != nil {
		return err
	}
	switch {
	case o.push && len(refs) == 0:
		return usageError("--push needs at least one --tag")
	case o.sign && !o.push:
		return usageError("--sign needs --push: signatures are stored in the registry")
	}
	var key *signature.SigningKey
	if o.sign {
		// Before the build: a wrong password should not cost a push.
		if key, err = o.keyFlags.load(cmd.ErrOrStderr()); err != nil {
			return err
		}
	}
	opts, err := o.meta.options()
	if err != nil {
		return err
	}
	img, err := source.Build(dir, opts)
	if err != nil {
		return err
	}
	stdout := cmd.OutOrStdout()
	text := o.out.format == outputText
	if text {
		fmt.Fprintf(stdout, "Built %s %s\n", img.Name, img.Digest)
	}
	if err := o.write(cmd, img, refs, key, text); err != nil {
		return err
	}
	switch {
	case !text:
		fmt.Fprintln(stdout, img.Digest)
	case !o.push && o.archive == "":
		fmt.Fprintln(cmd.ErrOrStderr(), "nothing was written: pass --tag REGISTRY/REPOSITORY:TAG --push to push the image, or --archive FILE.tar to save it")
	}
	return nil
}

// write saves img to --archive, pushes it to refs and signs it with key, as the flags say.
func (o *buildOptions) write(cmd *cobra.Command, img *source.Image, refs []source.Reference, key *signature.SigningKey, text bool) error {
	if o.archive != "" {
		if err := writeLayout(cmd, img, refs, o.archive); err != nil {
			return err
		}
		if text {
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s\n", o.archive)
		}
	}
	if o.push {
		if err := pushImage(cmd, &o.registry, img, refs, text); err != nil {
			return err
		}
	}
	if !o.sign {
		return nil
	}
	client, err := o.registry.client(cmd.ErrOrStderr(), refs...)
	if err != nil {
		return err
	}
	pinned := make([]source.Reference, len(refs))
	for i, ref := range refs {
		pinned[i] = ref.WithDigest(img.Digest)
	}
	return signImages(cmd, client, key, pinned, text)
}

// parseTagReferences parses the references an image is pushed or saved under (build --tag,
// push REF): each names a tag. A reference without tag or digest is refused rather than
// pushed untagged (by digest) or, as docker does, as :latest: oras refuses it too, and a tag
// moved in silence is what a Package following it would pull next. prefix names the flag.
func parseTagReferences(prefix string, args ...string) ([]source.Reference, error) {
	refs, err := parseReferences(args...)
	if err != nil {
		return nil, err
	}
	for i, ref := range refs {
		if ref.Tag == "" && ref.Digest == "" {
			return nil, usageError("%s%s names no tag: write %s:TAG (pkgsync does not default to latest)", prefix, args[i], args[i])
		}
	}
	return refs, nil
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
