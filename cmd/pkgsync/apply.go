package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newApplyCmd is a stub until its issue lands.
func newApplyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "apply",
		Short: "Apply a package to clusters once, phase by phase (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("apply is not implemented yet")
		},
	}
}
