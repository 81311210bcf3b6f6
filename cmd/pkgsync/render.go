package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newRenderCmd is a stub until its issue lands.
func newRenderCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "render",
		Short: "Render a package into ordered phases (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("render is not implemented yet")
		},
	}
}
