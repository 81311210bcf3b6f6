package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// Output formats: what is printed on stdout.
const (
	outputText   = "text"
	outputDigest = "digest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a mistake in the command line: exit code 2, as pkgsync's own.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run executes the command with stdout and stderr: exit code 0 success, 1 failure, 2 usage error.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "Error:", err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

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
		return opts, nil, usagef("the image records the commit time, not the build time: pass --created or set $%s "+
			"(for example --created $(git log -1 --format=%%ct))", sourceDateEpochEnv)
	}
	t, err := parseTime(created)
	if err != nil {
		return opts, nil, usagef("--created %q: want Unix seconds or RFC 3339 (2006-01-02T15:04:05Z)", created)
	}
	opts.Created = t
	var binaries []image.Binary
	for _, p := range f.platforms {
		goos, arch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return opts, nil, usagef("--platform %q: want OS/ARCH, such as linux/amd64", p)
		}
		binaries = append(binaries, image.Binary{OS: goos, Arch: arch})
	}
	if len(binaries) == 0 {
		return opts, nil, usagef("--platform: name at least one platform, such as linux/amd64")
	}
	return opts, binaries, nil
}

// command is the build command as the provenance records it: the inputs that decide the
// image, none of the machine's paths.
func (f *imageFlags) command(opts image.Options) []string {
	return []string{"release-image", "--platform=" + strings.Join(f.platforms, ","), "--main=" + f.mainPackage,
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

func newCommand() *cobra.Command {
	var (
		flags   imageFlags
		attach  attachFlags
		archive string
		tag     string
		output  string
	)
	cmd := &cobra.Command{
		Use:   "release-image --archive FILE.tar [--tag REF]",
		Short: "Build the pkgsync controller image into an OCI layout archive (make image runs it; needs Go and this repository)",
		Long: `release-image builds the controller image without a container engine: for each --platform it
cross-compiles --main with go build (CGO_ENABLED=0, -trimpath), and assembles an OCI image index
of images made from scratch: a base layer with CA certificates, /etc/passwd and /etc/group (user
nonroot, 65532), and a layer with the binary at /pkgsync, run as user 65532. Nothing is pulled.

The same commit gives the same digest: timestamps are the commit time (--created) or the Unix
epoch, and the build is independent of the machine's paths and environment. Run it from the root
of the pkgsync repository, or point --dir at it.

The index is written as an OCI image layout archive (--archive): pkgsync push pushes it, with
its attachments, and skopeo (oci-archive:) and podman load read it. --tag names the image in
the archive and in the provenance's subject.

The SBOM (SPDX 2.3 JSON, every Go module linked into the binaries, from their build
information) and the SLSA provenance v1 in-toto statement of the index are attached to it in
the archive: as OCI referrers, and the SBOM under cosign's tag sha256-HEX.sbom. --sbom and
--provenance also write them to files. Both are as reproducible as the image. They are not
signed here: "pkgsync sign --sbom --provenance" signs them, as cosign attestations, at release.`,
		Example: `  release-image --created "$(git log -1 --format=%ct)" --archive dist/pkgsync-image.tar
  release-image --created "$(git log -1 --format=%ct)" --archive dist/pkgsync-image.tar --tag registry.example.com/platform/pkgsync:v0.1.0`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains([]string{outputText, outputDigest}, output) {
				return usagef("--output-format must be %s or %s, not %q", outputText, outputDigest, output)
			}
			if archive == "" {
				return usagef("--archive FILE.tar: name the archive to write")
			}
			var ref *source.Reference
			if tag != "" {
				r, err := source.ParseReference(tag)
				if err != nil {
					return usagef("--tag: %w", err)
				}
				ref = &r
			}
			opts, binaries, err := flags.options()
			if err != nil {
				return err
			}
			return build(cmd, flags, attach, opts, binaries, archive, ref, output == outputText)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&tag, "tag", "t", "", "Reference REGISTRY/REPOSITORY:TAG the image is published as: its tag names the image in --archive, its name the provenance's subject")
	fs.StringVar(&archive, "archive", "", "Write the image index as an OCI image layout tar archive to this file")
	fs.StringVar(&output, "output-format", outputText, "What to print: text, or digest (only the image digest, for scripts)")
	flags.ApplyFlags(fs)
	attach.ApplyFlags(fs)
	return cmd
}

// build cross-compiles the binaries, assembles the index with its attachments and writes the
// archive.
func build(cmd *cobra.Command, flags imageFlags, attach attachFlags, opts image.Options, binaries []image.Binary, archive string, ref *source.Reference, text bool) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
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
	subject, refName := "pkgsync", version.Tag(opts.Version)
	if ref != nil {
		subject = ref.Name()
		if ref.Tag != "" {
			refName = ref.Tag
		}
	}
	attachments, err := attach.write(idx, opts, subject, flags.command(opts))
	if err != nil {
		return err
	}
	if err := writeLayout(archive, idx, refName, attachments); err != nil {
		return err
	}
	if !text {
		fmt.Fprintln(stdout, digest)
		return nil
	}
	fmt.Fprintf(stdout, "Built pkgsync %s %s (%s)\nWrote %s\n", opts.Version, digest, strings.Join(flags.platforms, ", "), archive)
	return nil
}

// writeLayout writes idx to file as an OCI layout archive.
func writeLayout(file string, idx v1.ImageIndex, refName string, attachments []image.Attachment) (err error) {
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
