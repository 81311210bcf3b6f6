package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// revisionNamePattern is the form of a fleet revision's name: the start of the image digest and
// of the template digest.
var revisionNamePattern = regexp.MustCompile(`^[0-9a-f]{12}-[0-9a-f]{8}$`)

// fleetApproveOutput is what `pkgsync fleet approve -o json|yaml` prints.
type fleetApproveOutput struct {
	Name      string `json:"name"`
	Partition string `json:"partition"`
	Revision  string `json:"revision"`
	// Target is the fleet's target revision when it was read; an approval of another revision
	// waits until that one is the target.
	Target string `json:"target"`
	// Changed is false when the partition was approved for the revision already (nothing is
	// written then).
	Changed bool   `json:"changed"`
	DryRun  string `json:"dryRun"`
}

func newFleetApproveCmd() *cobra.Command {
	var (
		partition, revision string
		kube                *kubeFlags
		dryRun              *dryRunFlag
		output              *outputFlag
	)
	cmd := &cobra.Command{
		Use:   "approve NAME --partition PARTITION [--revision REVISION] [--dry-run=none|client|server] [-o text|json|yaml]",
		Short: "Approve a revision for a partition of a HostedClusterPackage that needs approval",
		Long: `Approve writes the annotation approve.pkgsync.dev/PARTITION=REVISION on the HostedClusterPackage
NAME (a merge patch of that one annotation), which lets its rollout move the members of PARTITION,
one of spec.rollout.approvalRequired, to REVISION. REVISION defaults to the fleet's target
(status.target.name); an approval of another revision is written with a warning and does nothing
until that revision is the target. The fleet removes the approval once the revision it names is
rolled out completely. A partition approved for the revision already is left as it is (nothing is
written).

It needs patch on hostedclusterpackages (docs/fleet.md gives the approver's Role). Exits 1 when the
fleet does not exist, has no target yet and no --revision is given, or PARTITION does not need an
approval; 2 for a wrong command line.`,
		Example: `  pkgsync fleet approve hosted-addon --partition prod
  pkgsync fleet approve hosted-addon --partition prod --revision 08b24b0bb0d6-4498fd19 --dry-run=server`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("fleet approve takes one HostedClusterPackage name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := output.check(); err != nil {
				return err
			}
			if partition == "" {
				return usageError("--partition is required: the partition (a value of spec.rollout.partitions.labelKey) to approve")
			}
			if revision != "" && !revisionNamePattern.MatchString(revision) {
				return usageError("--revision %q is not a revision name: the fleet's revisions read like status.target.name, 12 and 8 hexadecimal digits (08b24b0bb0d6-4498fd19)", revision)
			}
			return approveFleet(cmd, kube, args[0], partition, revision, dryRun, output)
		},
	}
	kube = newKubeFlags(cmd.Flags(), kubeconfigUsage)
	cmd.Flags().StringVar(&partition, "partition", "", "The partition to approve: one of the fleet's spec.rollout.approvalRequired")
	cmd.Flags().StringVar(&revision, "revision", "", "The revision to approve (status.target.name); default the fleet's target")
	dryRun = addDryRunFlag(cmd.Flags(), false, "client prints the approval without sending it; server sends it as a server-side dry run, which is not persisted")
	output = addOutputFlag(cmd.Flags(), outputText)
	return cmd
}

// approveFleet writes (or, in a dry run, checks) the approval of revision, or the fleet's
// target, for partition.
func approveFleet(cmd *cobra.Command, kube *kubeFlags, name, partition, revision string, dryRun *dryRunFlag, output *outputFlag) error {
	c, cfg, err := fleetClient(kube)
	if err != nil {
		return err
	}
	var (
		fleet *v1alpha1.HostedClusterPackage
		out   fleetApproveOutput
		warn  sync.Once
	)
	// The default revision is the target as read: the patch carries the resourceVersion of that
	// read, so that an approval never names a target that changed meanwhile; a conflict (the
	// controller writes the status all the time) reads the fleet again.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fleet = &v1alpha1.HostedClusterPackage{}
		if err := fleetGetError(c.Get(cmd.Context(), client.ObjectKey{Name: name}, fleet), name, cfg.Host); err != nil {
			return err
		}
		var err error
		if out, err = approvalOf(fleet, partition, revision); err != nil {
			return err
		}
		out.DryRun = dryRun.mode
		if out.Revision != out.Target {
			warn.Do(func() {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: revision %s is not the fleet's target (%s): the approval waits until it is\n", printable(out.Revision), printable(targetText(out.Target)))
			})
		}
		if !out.Changed || dryRun.mode == dryRunClient {
			return nil
		}
		precondition := ""
		if revision == "" {
			precondition = fleet.ResourceVersion
		}
		if err := patchApproval(cmd, c, fleet, partition, out.Revision, precondition, dryRun.mode == dryRunServer); err != nil {
			return fmt.Errorf("approve partition %s of HostedClusterPackage %s on %s: %w", partition, name, cfg.Host, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if output.document() {
		return output.writeDocument(cmd, "the approval", out)
	}
	verb := "approved"
	if !out.Changed {
		verb = "already approved"
	}
	suffix := map[string]string{dryRunClient: " (dry run)", dryRunServer: " (server dry run)"}[dryRun.mode]
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "hostedclusterpackage.pkgsync.dev/%s %s: partition %s, revision %s%s\n", fleet.Name, verb, printable(partition), printable(out.Revision), suffix)
	return err
}

// approvalOf checks an approval of revision (the target when "") for partition against the
// fleet as read.
func approvalOf(fleet *v1alpha1.HostedClusterPackage, partition, revision string) (fleetApproveOutput, error) {
	out := fleetApproveOutput{Name: fleet.Name, Partition: partition, Revision: revision}
	if t := fleet.Status.Target; t != nil {
		out.Target = t.Name
	}
	required := fleet.Spec.Rollout.ApprovalRequired
	if !slices.Contains(required, partition) {
		listed := "lists none"
		if len(required) > 0 {
			listed = "lists " + strings.Join(required, ", ")
		}
		return out, fmt.Errorf("partition %q of HostedClusterPackage %s needs no approval: its spec.rollout.approvalRequired %s (add the partition there to gate it)", partition, fleet.Name, listed)
	}
	if out.Revision == "" {
		if out.Target == "" {
			return out, fmt.Errorf("HostedClusterPackage %s has no target revision yet (status.target): name the revision with --revision, or wait until pkgsync fleet status shows a target", fleet.Name)
		}
		out.Revision = out.Target
	}
	out.Changed = fleet.Annotations[v1alpha1.ApprovePartitionPrefix+partition] != out.Revision
	return out, nil
}

// patchApproval writes the one annotation with a merge patch: nothing else of the fleet is
// sent, so a concurrent write of its spec or status is never lost. With resourceVersion set,
// the patch applies only to that version of the fleet (a conflict otherwise).
func patchApproval(cmd *cobra.Command, c client.Client, fleet *v1alpha1.HostedClusterPackage, partition, revision, resourceVersion string, serverDryRun bool) error {
	metadata := map[string]any{"annotations": map[string]string{v1alpha1.ApprovePartitionPrefix + partition: revision}}
	if resourceVersion != "" {
		metadata["resourceVersion"] = resourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		return err
	}
	var opts []client.PatchOption
	if serverDryRun {
		opts = append(opts, client.DryRunAll)
	}
	return c.Patch(cmd.Context(), fleet, client.RawPatch(types.MergePatchType, patch), opts...)
}

// targetText names a target revision, or its absence.
func targetText(target string) string {
	if target == "" {
		return "none yet"
	}
	return target
}
