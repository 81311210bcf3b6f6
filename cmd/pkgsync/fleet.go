package main

import (
	"github.com/spf13/cobra"
)

func newFleetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Inspect and approve HostedClusterPackages: one package rolled out to many hosted clusters",
		Long: `Fleet commands read HostedClusterPackages (kubectl short name hcpkg), which keep a member
Package in the hosted-control-plane namespace of every selected HostedCluster and roll a new
revision out partition by partition; approve lets a rollout into a partition that waits for an
approval. See docs/fleet.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newFleetStatusCmd(), newFleetPlanCmd(), newFleetApproveCmd())
	return cmd
}
