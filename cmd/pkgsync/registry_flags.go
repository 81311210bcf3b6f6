package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/internal/version"
	"pkgsync.dev/pkgsync/source"
)

// progressThreshold is the blob size from which transfers show progress on a terminal.
const progressThreshold = 256 << 10

// registryOptions are the flags of the commands that talk to registries.
type registryOptions struct {
	plainHTTP             bool
	caFile                string
	insecureSkipTLSVerify bool
	registryConfig        string
	// overrides are registered only by the commands that read (overrideOptions.ApplyFlags).
	overrides overrideOptions
}

func (o *registryOptions) ApplyFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.plainHTTP, "plain-http", false,
		"Reach the registry over plain HTTP (loopback registries use it without this flag, unless --ca-file is given)")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM file of the CA certificates that sign the registry's certificate")
	fs.BoolVar(&o.insecureSkipTLSVerify, "insecure-skip-tls-verify", false, "Accept any registry certificate (unsafe)")
	fs.StringVar(&o.registryConfig, "registry-config", "",
		"Docker config file with registry credentials (default $DOCKER_CONFIG/config.json or ~/.docker/config.json)")
}

// client returns a registry client for refs, with Docker config credentials and, when stderr
// is a terminal, progress for large blobs.
func (o *registryOptions) client(stderr io.Writer, refs ...source.Reference) (*source.Client, error) {
	opts := source.Options{InsecureSkipTLSVerify: o.insecureSkipTLSVerify, UserAgent: "pkgsync/" + version.Version}
	if o.caFile != "" {
		ca, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("read --ca-file: %w", err)
		}
		opts.CABundle = ca
	}
	overrides, err := o.overrides.overrides()
	if err != nil {
		return nil, err
	}
	opts.Overrides = overrides
	if o.plainHTTP {
		for _, ref := range refs {
			opts.PlainHTTPHosts = append(opts.PlainHTTPHosts, ref.Registry, overriddenHost(overrides, ref))
		}
	}
	if o.registryConfig != "" {
		// oras reads a missing file as no credentials: a typo would push or pull anonymously.
		if _, err := os.Stat(o.registryConfig); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usageError("--registry-config %s: no such file: name an existing Docker config file ({} for no credentials), or leave the flag out for $DOCKER_CONFIG/config.json", o.registryConfig)
			}
			return nil, fmt.Errorf("--registry-config %s: %w", o.registryConfig, err)
		}
	}
	creds, err := source.CredentialsFromDockerConfig(o.registryConfig)
	if err != nil {
		return nil, err
	}
	opts.Credentials = creds
	if f, ok := terminalOf(stderr); ok {
		opts.Progress = newProgressPrinter(f).show
	}
	c, err := source.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %w", o.caFile, err)
	}
	return c, nil
}

// progressPrinter draws one line per large blob as it moves, updating at whole percents.
type progressPrinter struct {
	w    io.Writer
	mu   sync.Mutex
	last map[string]int64
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	return &progressPrinter{w: w, last: map[string]int64{}}
}

func (p *progressPrinter) show(pr source.Progress) {
	if pr.Size < progressThreshold {
		return
	}
	percent := pr.Done * 100 / pr.Size
	p.mu.Lock()
	defer p.mu.Unlock()
	if last, ok := p.last[pr.Digest]; ok && last == percent {
		return
	}
	p.last[pr.Digest] = percent
	end := ""
	if pr.Done >= pr.Size {
		end = "\n"
	}
	// The line is redrawn with CR, so it is written to the terminal itself; the digest is the
	// registry's text and goes through the filter.
	fmt.Fprintf(p.w, "\r%.19s %6.1f / %.1f MiB %3d%%%s", printable(pr.Digest), float64(pr.Done)/(1<<20), float64(pr.Size)/(1<<20), percent, end)
}

// Output formats of the commands that produce an image.
const (
	outputText   = "text"
	outputDigest = "digest"
)

// outputOptions select what a command prints on stdout.
type outputOptions struct {
	format string
}

func (o *outputOptions) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.format, "output-format", outputText, "What to print: text, or digest (only the image digest, for scripts)")
}

func (o *outputOptions) validate() error {
	if !slices.Contains([]string{outputText, outputDigest}, o.format) {
		return usageError("--output-format must be %s or %s, not %q", outputText, outputDigest, o.format)
	}
	return nil
}

// parseReferences parses command-line references; a bad one is a usage error.
func parseReferences(args ...string) ([]source.Reference, error) {
	refs := make([]source.Reference, 0, len(args))
	for _, arg := range args {
		ref, err := source.ParseReference(arg)
		if err != nil {
			return nil, usageError("%w", err)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}
