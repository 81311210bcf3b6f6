package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newBuildCmd is a stub until its issue lands.
func newBuildCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "build",
		Short: "Build a package image from a directory (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("build is not implemented yet")
		},
	}
}
