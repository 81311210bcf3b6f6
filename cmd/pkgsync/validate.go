package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newValidateCmd is a stub until its issue lands.
func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Validate a package and its configuration (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("validate is not implemented yet")
		},
	}
}
