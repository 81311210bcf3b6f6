package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newPullCmd is a stub until its issue lands.
func newPullCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pull",
		Short: "Pull a package image into a directory (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("pull is not implemented yet")
		},
	}
}
