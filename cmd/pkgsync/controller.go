package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newControllerCmd is a stub until its issue lands.
func newControllerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "controller",
		Short: "Run the Package controller (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("controller is not implemented yet")
		},
	}
}
