package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/render"
)

func newValidateCmd() *cobra.Command {
	var in renderInputs
	var out validateOutput
	cmd := &cobra.Command{
		Use:   "validate DIR|REF",
		Short: "Validate a package and its configuration",
		Long: `Render a package (a directory, or a registry reference that is pulled first) with a
configuration and report every problem at once: each with its file, document, line and field.
Without --config the package is checked as build checks it: values its schema requires may be
absent. Every case of the manifest's test.template (and of each component's) is rendered with
its own context too, as Package Operator's "kubectl package validate" does; its fixtures are
compared by "pkgsync test".

A configuration key the package's schema does not declare is dropped, as the API server drops
an unknown field of a custom resource, and reported as a warning naming the nearest declared
name; --strict makes warnings fail the validation, as kubectl's --validate=strict does.

The text output writes the problems and warnings on stderr, and "DIR: valid" on stdout. With -o
json or -o yaml the result is printed on stdout, valid or not:
{"package":..,"valid":..,"problems":[{"file":..,"document":..,"line":..,"field":..,"message":..}],
"warnings":[{"field":..,"message":..}]}; scripts may rely on that shape.

Exits 0 when valid, 1 when the package or configuration is invalid (or cannot be read), 2 for a
wrong command line.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			fsys, opts, err := in.open(cmd.Context(), args[0], cmd.ErrOrStderr())
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
			err = render.ValidatePackage(ctx, fsys, opts, cfg)
			var problems render.Errors
			if err != nil && !errors.As(err, &problems) {
				return exitCodeError{code: 1, err: fmt.Errorf("validate %s: %w", args[0], err)}
			}
			res := out.newValidateResult(args[0], problems, render.ConfigWarnings(fsys, opts))
			return out.print(cmd, res, lockHint(err, args[0]))
		},
	}
	in.ApplyFlags(cmd.Flags())
	out.ApplyFlags(cmd.Flags())
	return cmd
}
