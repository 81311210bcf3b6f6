package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/internal/image"
	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/source"
)

// sourceDateEpochEnv is the reproducible-builds convention for a build's timestamp.
const sourceDateEpochEnv = "SOURCE_DATE_EPOCH"

// imageFlags are the inputs of the controller image build.
type imageFlags struct {
	platforms                 []string
	dir, mainPackage          string
	version, revision, source string
	created                   string
}

func (f *imageFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.platforms, "platform", []string{"linux/amd64", "linux/arm64"}, "Platforms OS/ARCH of the image index (comma-separated or repeated)")
	fs.StringVar(&f.dir, "dir", ".", "Directory of the pkgsync module, where go build runs")
	fs.StringVar(&f.mainPackage, "main", "./cmd/pkgsync", "Main package to build, as go build takes it, relative to --dir")
	fs.StringVar(&f.version, "version", version.Version, "Version stamped into the binary and recorded as org.opencontainers.image.version")
	fs.StringVar(&f.revision, "revision", "", "Commit stamped into the binary and recorded as org.opencontainers.image.revision (default: this binary's commit)")
	fs.StringVar(&f.source, "source", version.Source, "Source repository URL, recorded as org.opencontainers.image.source")
	fs.StringVar(&f.created, "created", "", "Commit time, Unix seconds or RFC 3339, recorded as the creation time (default $"+sourceDateEpochEnv+"; make image passes git log -1 --format=%ct)")
}

// options turns the flags into build options, without the binaries.
func (f *imageFlags) options() (image.Options, []image.Binary, error) {
	opts := image.Options{Version: f.version, Revision: f.revision, Source: f.source}
	if opts.Revision == "" {
		opts.Revision = version.Revision()
	}
	created := f.created
	if created == "" {
		created = os.Getenv(sourceDateEpochEnv)
	}
	if created == "" {
		return opts, nil, usageError("the image records the commit time, not the build time: pass --created or set $%s "+
			"(for example --created $(git log -1 --format=%%ct))", sourceDateEpochEnv)
	}
	t, err := parseTime(created)
	if err != nil {
		return opts, nil, usageError("--created %q: want Unix seconds or RFC 3339 (2006-01-02T15:04:05Z)", created)
	}
	opts.Created = t
	var binaries []image.Binary
	for _, p := range f.platforms {
		goos, arch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return opts, nil, usageError("--platform %q: want OS/ARCH, such as linux/amd64", p)
		}
		binaries = append(binaries, image.Binary{OS: goos, Arch: arch})
	}
	if len(binaries) == 0 {
		return opts, nil, usageError("--platform: name at least one platform, such as linux/amd64")
	}
	return opts, binaries, nil
}

// command is the build command as the provenance records it: the inputs that decide the
// image, none of the machine's paths.
func (f *imageFlags) command(opts image.Options) []string {
	return []string{"pkgsync", "image", "--platform=" + strings.Join(f.platforms, ","), "--main=" + f.mainPackage,
		"--version=" + opts.Version, "--revision=" + opts.Revision, "--source=" + opts.Source,
		"--created=" + strconv.FormatInt(opts.Created.Unix(), 10)}
}

// parseTime reads Unix seconds or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	return time.Parse(time.RFC3339, s)
}

func newImageCmd() *cobra.Command {
	var (
		flags    imageFlags
		registry registryOptions
		out      outputOptions
		tags     []string
		push     bool
		archive  string
		attach   attachFlags
		// checkArchiveSpelling refuses --archive and its old spelling -o/--output at once.
		checkArchiveSpelling func() error
	)
	cmd := &cobra.Command{
		Use:    "image --archive FILE.tar | --tag REF --push",
		Short:  "Build the pkgsync controller image (make image runs it; needs Go and this repository)",
		Hidden: true,
		Long: `Image builds the controller image without a container engine: for each --platform it
cross-compiles --main with go build (CGO_ENABLED=0, -trimpath), and assembles an OCI image index
of images made from scratch: a base layer with CA certificates, /etc/passwd and /etc/group (user
nonroot, 65532), and a layer with the binary at /pkgsync, run as user 65532. Nothing is pulled.

The same commit gives the same digest: timestamps are the commit time (--created) or the Unix
epoch, and the build is independent of the machine's paths and environment. Run it from the root
of the pkgsync repository, or point --dir at it.

With --archive the index is written as an OCI image layout archive (pkgsync push, skopeo
oci-archive:, podman load read it); with --push it goes to every --tag.

--sbom and --provenance write the SBOM (SPDX 2.3 JSON, every Go module linked into the
binaries, from their build information) and the SLSA provenance v1 in-toto statement of the
index, and attach both to it, in the archive and when pushed: as OCI referrers, and the SBOM
under cosign's tag sha256-HEX.sbom. Both are as reproducible as the image. They are not signed
here: "pkgsync sign --sbom --provenance" signs them, as cosign attestations, at release.`,
		Example: `  pkgsync image --created "$(git log -1 --format=%ct)" --archive dist/pkgsync-image.tar
  pkgsync image --created "$(git log -1 --format=%ct)" --tag registry.example.com/platform/pkgsync:v0.1.0 --push`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkArchiveSpelling(); err != nil {
				return err
			}
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
			if !push && archive == "" {
				return usageError("nothing to do: pass --archive FILE.tar, or --tag REF --push")
			}
			opts, binaries, err := flags.options()
			if err != nil {
				return err
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			text := out.format == outputText

			work, err := os.MkdirTemp("", "pkgsync-image-")
			if err != nil {
				return fmt.Errorf("create a work directory: %w", err)
			}
			defer os.RemoveAll(work)
			for i, b := range binaries {
				b.Path = filepath.Join(work, b.OS+"_"+b.Arch, "pkgsync")
				fmt.Fprintf(stderr, "go build %s for %s\n", flags.mainPackage, b.Platform())
				if err := image.BuildBinary(cmd.Context(), image.GoBuild{
					Dir: flags.dir, Package: flags.mainPackage, OS: b.OS, Arch: b.Arch, Output: b.Path,
					Version: opts.Version, Commit: opts.Revision,
				}); err != nil {
					return err
				}
				binaries[i] = b
			}
			opts.Binaries = binaries
			idx, err := image.Build(opts)
			if err != nil {
				return err
			}
			digest, err := idx.Digest()
			if err != nil {
				return fmt.Errorf("build image: %w", err)
			}
			subject := "pkgsync"
			if len(refs) > 0 {
				subject = refs[0].Name()
			}
			attachments, err := attach.write(idx, opts, subject, flags.command(opts))
			if err != nil {
				return err
			}
			if text {
				fmt.Fprintf(stdout, "Built pkgsync %s %s (%s)\n", opts.Version, digest, strings.Join(flags.platforms, ", "))
			}

			layout := archive
			if layout == "" {
				layout = filepath.Join(work, "pkgsync-image.tar")
			}
			refName := version.Tag(opts.Version)
			if len(refs) > 0 && refs[0].Tag != "" {
				refName = refs[0].Tag
			}
			if err := writeImageLayout(layout, idx, refName, attachments); err != nil {
				return err
			}
			if text && archive != "" {
				fmt.Fprintf(stdout, "Wrote %s\n", archive)
			}
			if push {
				img, err := source.LoadLayout(cmd.Context(), layout)
				if err != nil {
					return err
				}
				if err := pushImage(cmd, &registry, img, refs, text); err != nil {
					return err
				}
				if err := pushAttachments(cmd, &registry, refs, attachments, text); err != nil {
					return err
				}
			}
			if !text {
				fmt.Fprintln(stdout, digest)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&tags, "tag", "t", nil, "Reference REGISTRY/REPOSITORY:TAG to push to; the first tag names the image in --archive (repeatable)")
	fs.BoolVar(&push, "push", false, "Push the image index to every --tag")
	fs.StringVar(&archive, "archive", "", "Write the image index as an OCI image layout tar archive to this file")
	flags.ApplyFlags(fs)
	attach.ApplyFlags(fs)
	registry.ApplyFlags(fs)
	out.ApplyFlags(fs)
	checkArchiveSpelling = renameFlag(cmd, "archive", "output", "o")
	return cmd
}

// writeImageLayout writes idx to file as an OCI layout archive.
func writeImageLayout(file string, idx v1.ImageIndex, refName string, attachments []image.Attachment) (err error) {
	if dir := filepath.Dir(file); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
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
	if err := image.WriteLayout(f, idx, refName, attachments...); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
