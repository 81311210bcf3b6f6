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
	cmd := &cobra.Command{
		Use:   "validate DIR|REF",
		Short: "Validate a package and its configuration",
		Long: `Render a package (a directory, or a registry reference that is pulled first) with a
configuration and report every problem at once: each with its file, document, line and field.
Without --config the package is checked as build checks it: values its schema requires may be
absent. Every case of the manifest's test.template (and of each component's) is rendered with
its own context too, as Package Operator's "kubectl package validate" does; its fixtures are
compared by "pkgsync test". Exits 1 when the package or configuration is invalid.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			if err := render.ValidatePackage(ctx, fsys, opts, cfg); err != nil {
				var problems render.Errors
				if errors.As(err, &problems) {
					for _, p := range problems {
						fmt.Fprintln(cmd.ErrOrStderr(), p)
					}
					if hint := lockHint(err, args[0]); hint != "" {
						fmt.Fprintln(cmd.ErrOrStderr(), hint)
					}
					return exitCodeError{code: 1, err: fmt.Errorf("%s: %d problem(s) found", args[0], len(problems))}
				}
				return exitCodeError{code: 1, err: fmt.Errorf("validate %s: %w", args[0], err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", args[0])
			return nil
		},
	}
	in.ApplyFlags(cmd.Flags())
	return cmd
}
