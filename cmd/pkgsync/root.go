package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "pkgsync",
		Short: "GitOps reconciler for HyperShift management clusters",
		Long: `pkgsync installs packages (OCI images of Kubernetes manifests) in ordered phases across a
HyperShift management cluster and its hosted clusters.

A package's phases marked "class: hosted-cluster" go to the hosted cluster's API server, reached
through the connector credentials HyperShift keeps in each hosted-control-plane namespace; the
other phases go to the management cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Before every command, since tests and main set the writers after newRootCmd.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { guardOutput(cmd.Root()) },
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("%w", err)
	})
	root.AddCommand(
		newBuildCmd(),
		newPushCmd(),
		newPullCmd(),
		newSignCmd(),
		newKeyCmd(),
		newVerifyCmd(),
		newRenderCmd(),
		newValidateCmd(),
		newLockCmd(),
		newTestCmd(),
		newConvertCmd(),
		newApplyCmd(),
		newDiffCmd(),
		newControllerCmd(),
		newInstallCmd(),
		newUninstallCmd(),
		newFleetCmd(),
		newVersionCmd(),
	)
	addVersionFlag(root)
	addRegistryHints(root)
	warnOnStderr(root)
	return root
}
