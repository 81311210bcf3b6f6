package main

import (
	"errors"
	"fmt"
	"strings"

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
	// cobra adds these when it executes; added now, they get the usage exit code too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	usageExitCodes(root)
	return root
}

// usageExitCodes makes every wrong command line of c and its subcommands a usage error (exit
// code 2), in one place rather than per command: an unknown flag through the root's
// FlagErrorFunc (above; cobra asks the nearest parent that has one), a wrong number of arguments
// through each command's Args, wrapped here, and an unknown command through the commands that
// only group others (the root, fleet, key), which cobra would answer with exit code 1 (the root)
// or with their help and exit code 0: they refuse any argument, and print their help without.
func usageExitCodes(c *cobra.Command) {
	switch args := c.Args; {
	case c.HasSubCommands() && !c.Runnable():
		c.Args = unknownCommand
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	case args != nil:
		c.Args = func(cmd *cobra.Command, a []string) error {
			err := args(cmd, a)
			var code exitCodeError
			if err == nil || errors.As(err, &code) {
				return err
			}
			return usageError("%s: %w", cmd.CommandPath(), err)
		}
	}
	for _, sub := range c.Commands() {
		usageExitCodes(sub)
	}
}

// unknownCommand refuses the arguments of a command that only groups subcommands: the first
// names no subcommand. The message is cobra's, with its suggestions.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if !cmd.DisableSuggestions {
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
	}
	return usageError("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
}
