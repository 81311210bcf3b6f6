package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// fleetListedMembers is how many members a fleet's status lists as in progress, failed, blocked,
// held or window-held (the controller's bound): a list this long may be cut.
const fleetListedMembers = 10

// fleetStatusOutput is what `pkgsync fleet status -o json` prints: a stable document of its own,
// not the API object, so that scripts do not break when the status gains fields.
type fleetStatusOutput struct {
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	Suspended          bool   `json:"suspended"`
	Paused             bool   `json:"paused"`
	// Target is the revision being rolled out (equal to Stable when the rollout is done).
	Target *fleetRevisionOutput `json:"target"`
	// TargetAppliedFrom lists the mirrors or overrides (REGISTRY/REPOSITORY) that served the
	// target to the members that applied it; empty when all read it where its image names it.
	TargetAppliedFrom []string `json:"targetAppliedFrom"`
	// Stable is the last revision every member reached.
	Stable *fleetRevisionOutput `json:"stable"`
	// Rejected is the revision spec.rollout.onFailure=Rollback took back, null when none.
	Rejected *fleetRejectedOutput  `json:"rejected"`
	Ready    *fleetConditionOutput `json:"ready"`
	// CurrentPartition is the partition being rolled out, "" when none is.
	CurrentPartition string                 `json:"currentPartition"`
	Members          fleetCountsOutput      `json:"members"`
	Partitions       []fleetPartitionOutput `json:"partitions"`
	InProgress       []fleetMemberOutput    `json:"inProgress"`
	Failed           []fleetMemberOutput    `json:"failed"`
	// Blocked members cannot move for a reason of their own cluster or namespace; Held ones are
	// held by the pkgsync.dev/hold annotation.
	Blocked []fleetMemberOutput `json:"blocked"`
	Held    []fleetMemberOutput `json:"held"`
	// WindowHeld members wait for a maintenance window of their HostedCluster (the
	// pkgsync.dev/maintenance-windows annotation), or for it to be fixed.
	WindowHeld []fleetWindowHeldOutput `json:"windowHeld"`
	// Analysis is the last result of each check of spec.rollout.analysis.
	Analysis []fleetCheckOutput `json:"analysis"`
	// Approvals lists the partitions of spec.rollout.approvalRequired, in that order.
	Approvals []fleetApprovalOutput `json:"approvals"`
	// DependsOn lists the fleets spec.dependsOn names; the members that wait for them are in
	// Blocked, with reason DependencyNotReady.
	DependsOn []fleetDependencyOutput `json:"dependsOn"`
}

// fleetApprovalOutput is a gated partition's approval: Revision is the revision its
// approve.pkgsync.dev annotation names ("" when none), State "Approved" when that is the target,
// "AwaitingApproval" when the rollout waits for it, "NotApproved" otherwise.
type fleetApprovalOutput struct {
	Partition string `json:"partition"`
	Revision  string `json:"revision"`
	State     string `json:"state"`
}

// fleetDependencyOutput is one fleet spec.dependsOn names, as the controller last read it:
// the revision its members must be Ready on ("" when it has none, or the controller has not
// read it yet), how many members of this fleet wait for it, and why, when it is the fleet
// itself that holds them (it does not exist, has no target yet).
type fleetDependencyOutput struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
	Waiting  int32  `json:"waiting"`
	Message  string `json:"message"`
}

// fleetCheckOutput is one analysis check's last result; EvaluatedAt is RFC 3339.
type fleetCheckOutput struct {
	Name        string `json:"name"`
	Partition   string `json:"partition"`
	Revision    string `json:"revision"`
	Result      string `json:"result"`
	Value       string `json:"value"`
	Message     string `json:"message"`
	EvaluatedAt string `json:"evaluatedAt"`
}

type fleetRevisionOutput struct {
	Name   string `json:"name"`
	Image  string `json:"image"`
	Digest string `json:"digest"`
	// Version is the image's version (its org.opencontainers.image.version annotation), ""
	// while no member has pulled it or when it declares none fit to show.
	Version        string `json:"version"`
	TemplateDigest string `json:"templateDigest"`
}

type fleetRejectedOutput struct {
	fleetRevisionOutput
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// RejectedAt is when the rollout halted and the revision was rejected (RFC 3339).
	RejectedAt string `json:"rejectedAt"`
}

// fleetWindowOutput is whether a partition's maintenance windows are open, and when that
// changes next (RFC 3339; "" when it never does).
type fleetWindowOutput struct {
	Open     bool   `json:"open"`
	OpensAt  string `json:"opensAt,omitempty"`
	ClosesAt string `json:"closesAt,omitempty"`
}

type fleetConditionOutput struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Since   string `json:"since"`
}

type fleetCountsOutput struct {
	Updated    int32 `json:"updated"`
	Ready      int32 `json:"ready"`
	Failed     int32 `json:"failed"`
	Blocked    int32 `json:"blocked"`
	Held       int32 `json:"held"`
	WindowHeld int32 `json:"windowHeld"`
	Total      int32 `json:"total"`
}

type fleetPartitionOutput struct {
	// Name is the partition label's value; "" for clusters without the label, or for all
	// clusters when the fleet has no partitions.
	Name  string `json:"name"`
	State string `json:"state"`
	fleetCountsOutput
	// Since is when State last changed (RFC 3339).
	Since string `json:"since"`
	// Window is null when no maintenance window applies to the partition.
	Window *fleetWindowOutput `json:"window"`
}

type fleetMemberOutput struct {
	Namespace string `json:"namespace"`
	Partition string `json:"partition"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// fleetWindowHeldOutput is a member that waits for its HostedCluster's maintenance windows:
// OpensAt is when the next opens (RFC 3339), "" when the annotation cannot be read or none
// opens again.
type fleetWindowHeldOutput struct {
	fleetMemberOutput
	OpensAt string `json:"opensAt"`
}

func newFleetStatusCmd() *cobra.Command {
	var (
		output *outputFlag
		watch  bool
		kube   *kubeFlags
	)
	cmd := &cobra.Command{
		Use:   "status NAME [--kubeconfig FILE] [--context NAME] [-o table|json|yaml | --watch]",
		Short: "Print where a HostedClusterPackage's rollout stands",
		Long: `Status reads the HostedClusterPackage NAME and prints its target and stable revisions, its
Ready condition, its partitions in rollout order (state and member counts) and the members in
progress, failed, blocked (their own cluster or namespace stops them: the HostedCluster is not
Available or paused, its API server does not answer, a Secret is missing, or it waits for a fleet
its spec.dependsOn names: reason DependencyNotReady), held (by the pkgsync.dev/hold annotation)
and waiting for a maintenance window of their HostedCluster (the pkgsync.dev/maintenance-windows
annotation: when the next opens, or what is wrong with the annotation), with the reason and
message of each. The status lists at most 10 members of each kind; the counts cover all of them.
A fleet with spec.dependsOn gets a "Depends on" table: each fleet named, the revision its members
must be Ready on, and how many members wait for it.

When members read the target from a mirror or through the controller's registry overrides
rather than where its image names it, "Mirrors:" lists those repositories
(status.targetAppliedFrom; targetAppliedFrom in -o json, empty otherwise).

Revisions read as the version their image declares beside the start of the digest,
"1.4.2 (sha256:3f9c0e1a…)" (the org.opencontainers.image.version annotation that pkgsync build
--version sets, as the members reported it), or the digest alone.

-o json and -o yaml print the same as a document of their own (not the API object).

--watch follows the fleet and its member Packages (list and watch, no polling) until
interrupted. On a terminal it redraws in place: a progress bar per partition (updated, failed,
blocked or held members marked), the members in flight and the soak or maintenance window
countdown. When standard output is not a terminal it prints a line for each change: the fleet,
a partition or a member, as it changes. It needs list and watch on Packages in every namespace.
Exits 1 when the fleet does not exist, 0 when it is deleted while watched.`,
		Example: `  pkgsync fleet status hosted-addon --kubeconfig mgmt.kubeconfig
  pkgsync fleet status hosted-addon --watch
  pkgsync fleet status hosted-addon -o json | jq '.partitions[] | select(.state == "Halted")'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("fleet status takes one HostedClusterPackage name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := output.check(); err != nil {
				return err
			}
			if watch {
				if cmd.Flags().Changed("output") {
					return usageError("--watch draws tables or lines: it does not take --output")
				}
				return watchFleet(cmd, kube, args[0])
			}
			fleet, err := getFleet(cmd, kube, args[0])
			if err != nil {
				return err
			}
			out := fleetStatusOf(fleet)
			if output.document() {
				return output.writeDocument(cmd, "the status of HostedClusterPackage "+fleet.Name, out)
			}
			return printFleetStatus(cmd.OutOrStdout(), fleet, out, time.Now())
		},
	}
	kube = newKubeFlags(cmd.Flags(), kubeconfigUsage)
	output = addOutputFlag(cmd.Flags(), outputTable)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Follow the rollout until interrupted: redraw in place on a terminal, a line per change otherwise")
	return cmd
}

// getFleet reads one HostedClusterPackage from the management cluster.
func getFleet(cmd *cobra.Command, kube *kubeFlags, name string) (*v1alpha1.HostedClusterPackage, error) {
	c, cfg, err := fleetClient(kube)
	if err != nil {
		return nil, err
	}
	fleet := &v1alpha1.HostedClusterPackage{}
	if err := fleetGetError(c.Get(cmd.Context(), client.ObjectKey{Name: name}, fleet), name, cfg.Host); err != nil {
		return nil, err
	}
	return fleet, nil
}

// fleetClient is a client of the management cluster with the pkgsync API's scheme
// (c.Scheme()), and its configuration, for the fleet commands.
func fleetClient(kube *kubeFlags) (client.Client, *rest.Config, error) {
	cfg, scheme, err := fleetClientConfig(kube)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the management cluster %s: %w", cfg.Host, err)
	}
	return c, cfg, nil
}

// fleetClientConfig is the management cluster's client configuration and the scheme of the
// pkgsync API, for the fleet commands.
func fleetClientConfig(kube *kubeFlags) (*rest.Config, *runtime.Scheme, error) {
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, nil, err
	}
	cfg.UserAgent = "pkgsync-fleet-status"
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("register the pkgsync API: %w", err)
	}
	return cfg, scheme, nil
}

// fleetGetError says what an error reading the fleet name from host means.
func fleetGetError(err error, name, host string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("HostedClusterPackage %q not found on %s: kubectl get hostedclusterpackages lists the fleets", name, host)
	case apimeta.IsNoMatchError(err):
		return fmt.Errorf("the HostedClusterPackage API is not installed on %s (pkgsync install installs it): %w", host, err)
	}
	return fmt.Errorf("get HostedClusterPackage %q from %s: %w", name, host, err)
}

// fleetStatusOf is the output document of a fleet; lists are empty, never null.
func fleetStatusOf(fleet *v1alpha1.HostedClusterPackage) fleetStatusOutput {
	st := &fleet.Status
	out := fleetStatusOutput{
		Name: fleet.Name, Generation: fleet.Generation, ObservedGeneration: st.ObservedGeneration,
		Suspended: fleet.Spec.Suspend, Paused: fleet.Spec.Rollout.Paused,
		CurrentPartition:  st.CurrentPartition,
		TargetAppliedFrom: append([]string{}, st.TargetAppliedFrom...),
		Members:           countsOf(st.MemberCounts),
		Partitions:        []fleetPartitionOutput{},
		InProgress:        membersOf(st.InProgress),
		Failed:            membersOf(st.FailedMembers),
		Blocked:           membersOf(st.BlockedMembers),
		Held:              membersOf(st.HeldMembers),
		WindowHeld:        []fleetWindowHeldOutput{},
		Analysis:          []fleetCheckOutput{},
		Approvals:         approvalsOf(fleet),
		DependsOn:         dependenciesOf(fleet),
	}
	for _, m := range st.WindowHeldMembers {
		held := fleetWindowHeldOutput{fleetMemberOutput: membersOf([]v1alpha1.MemberStatus{m.MemberStatus})[0]}
		if m.OpensAt != nil {
			held.OpensAt = rfc3339(m.OpensAt.Time)
		}
		out.WindowHeld = append(out.WindowHeld, held)
	}
	for _, c := range st.Analysis {
		out.Analysis = append(out.Analysis, fleetCheckOutput{Name: c.Name, Partition: c.Partition, Revision: c.Revision, Result: string(c.Result),
			Value: c.Value, Message: c.Message, EvaluatedAt: rfc3339(c.EvaluatedAt.Time)})
	}
	if st.Target != nil {
		out.Target = revisionOf(*st.Target)
	}
	if st.Stable != nil {
		out.Stable = revisionOf(st.Stable.FleetRevision)
	}
	if r := st.Rejected; r != nil {
		out.Rejected = &fleetRejectedOutput{fleetRevisionOutput: *revisionOf(r.FleetRevision), Reason: r.Reason, Message: r.Message, RejectedAt: rfc3339(r.RejectedAt.Time)}
	}
	if c := apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition); c != nil {
		out.Ready = &fleetConditionOutput{Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: rfc3339(c.LastTransitionTime.Time)}
	}
	for _, p := range st.Partitions {
		po := fleetPartitionOutput{
			Name: p.Name, State: string(p.State), fleetCountsOutput: countsOf(p.MemberCounts), Since: rfc3339(p.LastTransitionTime.Time),
		}
		if w := p.Window; w != nil {
			po.Window = &fleetWindowOutput{Open: w.Open}
			if w.OpensAt != nil {
				po.Window.OpensAt = rfc3339(w.OpensAt.Time)
			}
			if w.ClosesAt != nil {
				po.Window.ClosesAt = rfc3339(w.ClosesAt.Time)
			}
		}
		out.Partitions = append(out.Partitions, po)
	}
	return out
}

// Approval states in fleetApprovalOutput.
const (
	approvalApproved    = "Approved"
	approvalAwaiting    = string(v1alpha1.PartitionAwaitingApproval)
	approvalNotApproved = "NotApproved"
)

// approvalsOf is the approval of each partition spec.rollout.approvalRequired lists.
func approvalsOf(fleet *v1alpha1.HostedClusterPackage) []fleetApprovalOutput {
	out := []fleetApprovalOutput{}
	for _, p := range fleet.Spec.Rollout.ApprovalRequired {
		a := fleetApprovalOutput{Partition: p, Revision: fleet.Annotations[v1alpha1.ApprovePartitionPrefix+p], State: approvalNotApproved}
		switch {
		case a.Revision != "" && fleet.Status.Target != nil && a.Revision == fleet.Status.Target.Name:
			a.State = approvalApproved
		case slices.ContainsFunc(fleet.Status.Partitions, func(s v1alpha1.PartitionStatus) bool {
			return s.Name == p && s.State == v1alpha1.PartitionAwaitingApproval
		}):
			a.State = approvalAwaiting
		}
		out = append(out, a)
	}
	return out
}

// dependenciesOf lists spec.dependsOn with what status.dependencies says of each (the status
// may be a reconcile behind the spec: a fleet it does not name yet has no revision).
func dependenciesOf(fleet *v1alpha1.HostedClusterPackage) []fleetDependencyOutput {
	read := map[string]v1alpha1.FleetDependencyStatus{}
	for _, d := range fleet.Status.Dependencies {
		read[d.Name] = d
	}
	out := make([]fleetDependencyOutput, 0, len(fleet.Spec.DependsOn))
	for _, d := range fleet.Spec.DependsOn {
		st := read[d.Name]
		out = append(out, fleetDependencyOutput{Name: d.Name, Revision: st.Revision, Waiting: st.Waiting, Message: st.Message})
	}
	return out
}

func revisionOf(r v1alpha1.FleetRevision) *fleetRevisionOutput {
	return &fleetRevisionOutput{Name: r.Name, Image: r.Image, Digest: r.Digest, Version: source.CleanVersion(r.Version), TemplateDigest: r.TemplateDigest}
}

func countsOf(c v1alpha1.MemberCounts) fleetCountsOutput {
	return fleetCountsOutput{Updated: c.Updated, Ready: c.Ready, Failed: c.Failed, Blocked: c.Blocked, Held: c.Held, WindowHeld: c.WindowHeld, Total: c.Total}
}

func membersOf(ms []v1alpha1.MemberStatus) []fleetMemberOutput {
	out := make([]fleetMemberOutput, 0, len(ms))
	for _, m := range ms {
		out = append(out, fleetMemberOutput{Namespace: m.Namespace, Partition: m.Partition, Reason: m.Reason, Message: m.Message})
	}
	return out
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
