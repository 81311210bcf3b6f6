package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/render/schema"
)

// validateLong is validate's help.
var validateLong = `Render a package (a directory, or a registry reference that is pulled first) with a
configuration and report every problem at once: each with its file, document, line and field.
Without --config the package is checked as build checks it: values its schema requires may be
absent. Every case of the manifest's test.template (and of each component's) is rendered with
its own context too, as Package Operator's "kubectl package validate" does; its fixtures are
compared by "pkgsync test".

Every object rendered is checked as the API server would check it, offline: built-in kinds
against the schemas of Kubernetes ` + schema.KubernetesVersion() + ` (unknown fields, types, kinds and API versions),
names, namespaces, labels and annotations, the enums and sizes the API server enforces, and
container images as references; custom resources against the CustomResourceDefinitions the
package ships or --crds gives. Objects of other kinds are not checked: their kinds are listed
on stderr, and do not fail the validation.

A directory is read as build reads it, and every limit build applies is checked (32 MiB
compressed, 128 MiB of files, 10000 entries, 1024-byte paths; no symbolic links): each problem
names its file, and for a size the largest files.

With -n NAMESPACE the package is checked as a Package in that namespace installs it: the
manifest's spec.scopes must allow Namespaced, and on the management cluster (not the hosted
cluster) every object must be namespaced and in NAMESPACE, as the controller confines it unless
started with --allow-cross-namespace. --scope Cluster checks spec.scopes as a ClusterPackage's.

A configuration key the package's schema does not declare is dropped, as the API server drops
an unknown field of a custom resource, and reported as a warning naming the nearest declared
name; --strict makes warnings fail the validation, as kubectl's --validate=strict does.

The text output writes the problems and warnings on stderr, and "DIR: valid" on stdout. With -o
json or -o yaml the result is printed on stdout, valid or not:
{"package":..,"valid":..,"problems":[{"file":..,"document":..,"line":..,"field":..,"message":..}],
"warnings":[{"field":..,"message":..}]}; scripts may rely on that shape.

Exits 0 when valid, 1 when the package, its configuration or an object is invalid (or cannot be
read), 2 for a wrong command line.`

func newValidateCmd() *cobra.Command {
	var (
		in      renderInputs
		out     validateOutput
		install installScope
		crds    []string
	)
	cmd := &cobra.Command{
		Use:   "validate DIR|REF",
		Short: "Validate a package, its configuration and every object it renders",
		Long:  validateLong,
		Example: `  pkgsync validate ./my-package
  pkgsync validate ./my-package --config values.yaml --crds ./cluster-crds/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			extra, err := readCRDs(crds)
			if err != nil {
				return exitCodeError{code: 1, err: err}
			}
			scope, err := install.resolve(in.namespace)
			if err != nil {
				return err
			}
			fsys, opts, err := in.open(cmd.Context(), args[0], cmd.ErrOrStderr())
			if res, ok := out.packageDirResult(args[0], err); ok {
				return out.print(cmd, res, "")
			}
			if err != nil {
				return err
			}
			cfg := render.WithoutConfig
			if in.configFile != "" {
				cfg = render.WithConfig
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			v, err := render.ValidatePackage(ctx, fsys, opts, cfg, extra...)
			if v != nil && len(v.NotChecked) > 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), notCheckedNote(v.NotChecked, "in the package or --crds"))
			}
			var problems render.Errors
			if err != nil && !errors.As(err, &problems) {
				return exitCodeError{code: 1, err: fmt.Errorf("validate %s: %w", args[0], err)}
			}
			scopeProblems, scopeErr := installProblems(ctx, fsys, opts, cfg, scope)
			if scopeErr != nil {
				return exitCodeError{code: 1, err: fmt.Errorf("validate %s: %w", args[0], scopeErr)}
			}
			problems = append(problems, scopeProblems...)
			res := out.newValidateResult(args[0], problems, render.ConfigWarnings(fsys, opts))
			return out.print(cmd, res, lockHint(err, args[0]))
		},
	}
	in.ApplyFlags(cmd.Flags())
	out.ApplyFlags(cmd.Flags())
	cmd.Flags().StringArrayVar(&crds, "crds", nil, "file or directory of CustomResourceDefinitions (YAML or JSON, lists too) to check custom resources against, besides the package's own (repeatable)")
	install.ApplyFlags(cmd.Flags())
	return cmd
}

// notCheckedNote names the kinds validate or test found no schema for; where says where a
// CustomResourceDefinition for them would have been looked for.
func notCheckedNote(kinds []string, where string) string {
	noun, pronoun := "kinds", "them"
	if len(kinds) == 1 {
		noun, pronoun = "kind", "it"
	}
	return fmt.Sprintf("%d %s not checked against a schema: %s (no CustomResourceDefinition for %s %s)",
		len(kinds), noun, strings.Join(kinds, ", "), pronoun, where)
}
