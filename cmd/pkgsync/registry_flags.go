package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/spf13/pflag"
	"oras.land/oras-go/v2/registry/remote/auth"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/cloudauth"
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
	provider              string
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
	fs.StringVar(&o.provider, "provider", string(v1alpha1.RegistryProviderGeneric),
		"Where registry credentials come from: generic (the Docker config), or aws, azure, gcp: this machine's cloud credentials exchanged for Amazon ECR, Azure Container Registry or Google Artifact Registry ones (the Docker config for other registries)")
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
	if opts.Credentials, err = o.cloudCredentials(opts.CABundle, creds, refs); err != nil {
		return nil, err
	}
	if f, ok := terminalOf(stderr); ok {
		opts.Progress = newProgressPrinter(f).show
	}
	c, err := source.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %w", o.caFile, err)
	}
	return c, nil
}

// cloudCredentials returns creds with --provider's in front: the cloud's registry credentials,
// exchanged from this machine's ambient cloud credentials, for the provider's registries; creds
// for every other registry. With generic, creds alone.
func (o *registryOptions) cloudCredentials(caBundle []byte, creds source.Credentials, refs []source.Reference) (source.Credentials, error) {
	provider := v1alpha1.RegistryProvider(o.provider)
	if provider == v1alpha1.RegistryProviderGeneric || provider == "" {
		return creds, nil
	}
	if !slices.Contains([]v1alpha1.RegistryProvider{v1alpha1.RegistryProviderAWS, v1alpha1.RegistryProviderAzure, v1alpha1.RegistryProviderGCP}, provider) {
		return nil, usageError("--provider must be generic, aws, azure or gcp, not %q", o.provider)
	}
	ex, err := cloudauth.New(cloudauth.Options{CABundle: caBundle, CLI: true})
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %w", o.caFile, err)
	}
	// A command naming none of the provider's registries is told so; one naming some (lock's
	// images may be anywhere) reads the others with the Docker config.
	var firstErr error
	for _, ref := range refs {
		err := ex.CheckRegistry(provider, ref.Registry)
		if err == nil {
			firstErr = nil
			break
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, usageError("--provider %s: %v", provider, firstErr)
	}
	cloud, err := ex.Credentials(provider, cloudauth.Identity{})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, host string) (auth.Credential, error) {
		cred, err := cloud(ctx, host)
		if err != nil || cred != auth.EmptyCredential {
			return cred, err
		}
		return creds(ctx, host)
	}, nil
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
