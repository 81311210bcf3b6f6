package main

import (
	"strings"

	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/source"
)

// overrideOptions are Package Operator's registry overrides, for the commands that read
// packages and images (pull, render, validate, apply, lock) and for the controller.
type overrideOptions struct {
	hosts    string
	prefixes string
}

func (o *overrideOptions) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.hosts, "registry-host-overrides", "",
		"Registry hosts to read from instead of the ones references name, as Package Operator's flag: FROM=TO[,FROM=TO...], e.g. quay.io=mirror.example.com:5000 (the package image, its signatures and tags, and the .images templates see)")
	fs.StringVar(&o.prefixes, "image-prefix-overrides", "",
		"Image reference prefixes to replace, as Package Operator's flag: FROM=TO[,FROM=TO...], e.g. quay.io/my-org/=mirror.example.com/mirror-org/ (the longest matching FROM wins; applied before --registry-host-overrides)")
}

// overrides parses the flags; a bad one is a usage error.
func (o *overrideOptions) overrides() (source.Overrides, error) {
	hosts, err := source.ParseHostOverrides(o.hosts)
	if err != nil {
		return source.Overrides{}, usageError("--registry-host-overrides: %w", err)
	}
	prefixes, err := source.ParsePrefixOverrides(o.prefixes)
	if err != nil {
		return source.Overrides{}, usageError("--image-prefix-overrides: %w", err)
	}
	return source.Overrides{Hosts: hosts, Prefixes: prefixes}, nil
}

// overriddenHost is the registry host ref is read from under the overrides.
func overriddenHost(o source.Overrides, ref source.Reference) string {
	host, _, _ := strings.Cut(o.Image(ref.Name()), "/")
	return host
}
