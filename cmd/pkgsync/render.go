package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/render"
)

// renderInputs are the flags render and validate share: where the package is and what to
// render it with.
type renderInputs struct {
	configFile        string
	name              string
	namespace         string
	kubernetesVersion string
	hostedCluster     string
	component         string
	openShiftVersion  string
	// registry reaches the registry when the package is given as a reference.
	registry registryOptions
}

func (o *renderInputs) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.configFile, "config", "", "file holding the package configuration (YAML or JSON object)")
	fs.StringVar(&o.name, "name", "", "name of the Package, seen by templates as .package.metadata.name (default: the manifest's name)")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the Package, seen by templates as .package.metadata.namespace")
	fs.StringVar(&o.kubernetesVersion, "kubernetes-version", "", "Kubernetes version templates see as .environment.kubernetes.version")
	fs.StringVar(&o.openShiftVersion, "openshift-version", "", "OpenShift version templates see as .environment.openShift.version and constraints check (empty: not OpenShift)")
	fs.StringVar(&o.component, "component", "", "component of a multi-component package to render (components/NAME), as a Package's spec.component selects it")
	fs.StringVar(&o.hostedCluster, "hosted-cluster", "", "NAMESPACE/NAME of a HyperShift HostedCluster, to render as in its hosted-control-plane namespace")
	o.registry.ApplyFlags(fs)
	o.registry.overrides.ApplyFlags(fs)
}

// options turns the flags into render options.
func (o *renderInputs) options() (render.Options, error) {
	opts := render.Options{Name: o.name, Namespace: o.namespace, Component: o.component}
	overrides, err := o.registry.overrides.overrides()
	if err != nil {
		return opts, err
	}
	if !overrides.IsZero() {
		opts.RelocateImage = overrides.Image
	}
	opts.Environment.KubernetesVersion = o.kubernetesVersion
	opts.Environment.OpenShiftVersion = o.openShiftVersion
	if o.configFile != "" {
		data, err := os.ReadFile(o.configFile)
		if err != nil {
			return opts, fmt.Errorf("read configuration: %w", err)
		}
		opts.Config = data
	}
	if o.hostedCluster != "" {
		ns, name, ok := strings.Cut(o.hostedCluster, "/")
		if !ok || ns == "" || name == "" {
			return opts, usageError("--hosted-cluster must be NAMESPACE/NAME, not %q", o.hostedCluster)
		}
		opts.Environment.HostedCluster = &render.HostedCluster{
			Name:      name,
			Namespace: ns,
			// HyperShift's hosted-control-plane namespace: <namespace>-<name with dots as dashes>.
			HostedClusterNamespace: ns + "-" + strings.ReplaceAll(name, ".", "-"),
		}
	}
	return opts, nil
}

// open builds the render options and opens the package argument, a directory or a registry
// reference.
func (o *renderInputs) open(ctx context.Context, arg string, stderr io.Writer) (fs.FS, render.Options, error) {
	opts, err := o.options()
	if err != nil {
		return nil, opts, err
	}
	fsys, image, err := o.registry.openPackage(ctx, arg, stderr)
	if err != nil {
		return nil, opts, err
	}
	opts.Image = image
	return fsys, opts, nil
}

func newRenderCmd() *cobra.Command {
	var in renderInputs
	var output string
	cmd := &cobra.Command{
		Use:   "render DIR|REF",
		Short: "Render a package into ordered phases",
		Long: `Render a package with a configuration and print its objects phase by phase. The package is
a directory or, when no such directory exists, a registry reference that is pulled first. A
directory is read as build reads it: dot-files are skipped; symbolic links are errors.

The yaml output is one multi-document stream with a comment "# Phase N: NAME (class: CLASS)"
before each phase. The json output is {"phases":[{"name":..,"class":..,"objects":[..]}]},
class being "" for the management cluster and "hosted-cluster" for the hosted cluster; scripts
may rely on that shape.

A configuration key the package's schema does not declare is dropped, as the API server drops
an unknown field of a custom resource, with a warning on stderr naming the nearest declared
name ("pkgsync validate --strict" fails on it). With -n NAMESPACE, what the controller would
refuse of a Package in that namespace (see "pkgsync validate -n") is a warning on stderr too.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "yaml" && output != "json" {
				return usageError("--output must be yaml or json, not %q", output)
			}
			fsys, opts, err := in.open(cmd.Context(), args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			res, err := renderPackage(cmd.Context(), cmd.ErrOrStderr(), fsys, opts)
			if err != nil {
				return fmt.Errorf("render %s: %w", args[0], err)
			}
			if err := warnInstallScope(cmd.Context(), cmd.ErrOrStderr(), fsys, opts); err != nil {
				return fmt.Errorf("render %s: %w", args[0], err)
			}
			if output == "json" {
				return res.WriteJSON(cmd.OutOrStdout())
			}
			// WriteYAML names each phase in a comment, outside any quoted string, and a pipe
			// gets the YAML unfiltered (yamlOutput): a line break in a name would add documents
			// of the package's choosing to what kubectl apply reads, a control character would
			// reach the terminal behind it.
			for _, p := range res.Phases {
				if printable(p.Name) != p.Name {
					return fmt.Errorf("render %s: phase %q cannot be written as a YAML comment: a phase name for -o yaml is one line of printable characters (-o json shows it escaped)", args[0], p.Name)
				}
			}
			return res.WriteYAML(yamlOutput(cmd))
		},
	}
	in.ApplyFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}
