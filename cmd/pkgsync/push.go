package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newPushCmd is a stub until its issue lands.
func newPushCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "push",
		Short: "Push a package directory or image archive to a registry (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("push is not implemented yet")
		},
	}
}
