package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// The human-readable form of `pkgsync fleet status` (fleet_status.go makes the document it prints).

// printFleetStatus prints the human-readable status: a header, the partitions, the members.
func printFleetStatus(w io.Writer, fleet *v1alpha1.HostedClusterPackage, out fleetStatusOutput, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	revision := func(r *fleetRevisionOutput, none string) string {
		if r == nil {
			return none
		}
		return versionText(r.Version, r.Digest) + "  " + printable(r.Name) + "  " + printable(r.Image)
	}
	fmt.Fprintf(tw, "Fleet:\t%s\n", printable(out.Name))
	fmt.Fprintf(tw, "Target:\t%s\n", revision(out.Target, "none yet (the image tag is not resolved)"))
	if len(out.TargetAppliedFrom) > 0 {
		fmt.Fprintf(tw, "Mirrors:\t%s (served the target to members, instead of its image's repository)\n", appliedFromText(out.TargetAppliedFrom))
	}
	fmt.Fprintf(tw, "Stable:\t%s\n", revision(out.Stable, "none yet (no revision has reached every member)"))
	if r := out.Rejected; r != nil {
		fmt.Fprintf(tw, "Rejected:\t%s  %s, %s: %s: %s (not rolled out again until the tag moves to another digest or a reconcile is requested)\n",
			versionText(r.Version, r.Digest), printable(r.Name), printable(r.RejectedAt), printable(r.Reason), printable(r.Message))
	}
	ready := "Unknown (no Ready condition yet)"
	if c := out.Ready; c != nil {
		ready = fmt.Sprintf("%s  %s: %s", c.Status, printable(c.Reason), printable(c.Message))
	}
	fmt.Fprintf(tw, "Ready:\t%s\n", ready)
	if out.ObservedGeneration != out.Generation {
		fmt.Fprintf(tw, "Observed:\tgeneration %d of %d: the controller has not acted on the latest spec yet\n", out.ObservedGeneration, out.Generation)
	}
	switch {
	case out.Suspended:
		fmt.Fprintf(tw, "Rollout:\tsuspended (spec.suspend): no member is created, changed or removed\n")
	case out.Paused:
		fmt.Fprintf(tw, "Rollout:\tpaused (spec.rollout.paused): no member moves to another revision\n")
	}
	m := out.Members
	windowHeld := ""
	if m.WindowHeld > 0 {
		windowHeld = fmt.Sprintf(", %d waiting for their cluster's window", m.WindowHeld)
	}
	fmt.Fprintf(tw, "Members:\t%d updated, %d ready, %d failed, %d blocked, %d held%s, %d total\n", m.Updated, m.Ready, m.Failed, m.Blocked, m.Held, windowHeld, m.Total)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	if err := printPartitions(w, fleet, out.Partitions, now); err != nil {
		return err
	}
	if err := printAnalysis(w, fleet, out.Analysis, now); err != nil {
		return err
	}
	if err := printApprovals(w, fleet, out.Approvals); err != nil {
		return err
	}
	if err := printDependencies(w, out.DependsOn); err != nil {
		return err
	}
	if err := printMembers(w, fleet, "Members in progress", out.InProgress); err != nil {
		return err
	}
	if err := printMembers(w, fleet, "Failed members", out.Failed); err != nil {
		return err
	}
	if err := printMembers(w, fleet, "Blocked members", out.Blocked); err != nil {
		return err
	}
	if err := printMembers(w, fleet, "Held members", out.Held); err != nil {
		return err
	}
	return printWindowHeld(w, fleet, out.WindowHeld, now)
}

// printWindowHeld prints the members that wait for a maintenance window of their HostedCluster,
// with when it opens ("-" when the annotation cannot be read, or no window opens again).
func printWindowHeld(w io.Writer, fleet *v1alpha1.HostedClusterPackage, ms []fleetWindowHeldOutput, now time.Time) error {
	const title = "Waiting for their cluster's maintenance window (" + v1alpha1.MaintenanceWindowsAnnotation + ")"
	if !printMemberListTitle(w, title, len(ms)) {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPARTITION\tREASON\tOPENS\tMESSAGE")
	for _, m := range ms {
		opens := "-"
		if t, err := time.Parse(time.RFC3339, m.OpensAt); err == nil {
			opens = m.OpensAt + " (in " + duration.HumanDuration(t.Sub(now)) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(m.Namespace), partitionLabel(fleet, m.Partition), printable(m.Reason), opens, printable(m.Message))
	}
	return tw.Flush()
}

// appliedFromText lists the repositories of status.targetAppliedFrom on one line.
func appliedFromText(from []string) string {
	out := make([]string, len(from))
	for i, f := range from {
		out[i] = printable(f)
	}
	return strings.Join(out, ", ")
}

// printPartitions prints the partitions in rollout order, with how long each is in its state.
func printPartitions(w io.Writer, fleet *v1alpha1.HostedClusterPackage, partitions []fleetPartitionOutput, now time.Time) error {
	if len(partitions) == 0 {
		_, err := fmt.Fprintln(w, "Partitions: none")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	// The WINDOW column is there when a maintenance window applies to some partition.
	windows := slices.ContainsFunc(partitions, func(p fleetPartitionOutput) bool { return p.Window != nil })
	// The WINDOW-HELD column is there when a member waits for its HostedCluster's window.
	windowHeld := slices.ContainsFunc(partitions, func(p fleetPartitionOutput) bool { return p.WindowHeld > 0 })
	header := "NAME\tSTATE\tUPDATED\tREADY\tFAILED\tBLOCKED\tHELD"
	if windowHeld {
		header += "\tWINDOW-HELD"
	}
	header += "\tTOTAL\tSINCE"
	if windows {
		header += "\tWINDOW"
	}
	fmt.Fprintln(tw, header)
	for _, p := range partitions {
		since := "-"
		if t, err := time.Parse(time.RFC3339, p.Since); err == nil {
			since = duration.HumanDuration(now.Sub(t))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d", partitionLabel(fleet, p.Name), printable(p.State), p.Updated, p.Ready, p.Failed, p.Blocked, p.Held)
		if windowHeld {
			fmt.Fprintf(tw, "\t%d", p.WindowHeld)
		}
		fmt.Fprintf(tw, "\t%d\t%s", p.Total, since)
		if windows {
			fmt.Fprintf(tw, "\t%s", windowText(p.Window, now))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// printAnalysis prints the analysis checks' last results, when the fleet has an analysis.
func printAnalysis(w io.Writer, fleet *v1alpha1.HostedClusterPackage, checks []fleetCheckOutput, now time.Time) error {
	if fleet.Spec.Rollout.Analysis == nil && len(checks) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	if len(checks) == 0 {
		_, err := fmt.Fprintln(w, "Analysis: not evaluated yet (the checks run while a partition soaks)")
		return err
	}
	fmt.Fprintln(w, "Analysis:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tPARTITION\tRESULT\tVALUE\tEVALUATED\tMESSAGE")
	for _, c := range checks {
		evaluated := "-"
		if t, err := time.Parse(time.RFC3339, c.EvaluatedAt); err == nil {
			evaluated = duration.HumanDuration(now.Sub(t)) + " ago"
		}
		value := c.Value
		if value == "" {
			value = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(c.Name), partitionLabel(fleet, c.Partition), printable(c.Result), printable(value), evaluated, printable(c.Message))
	}
	return tw.Flush()
}

// printApprovals prints the approval of each gated partition, and the command that gives the
// one the rollout waits for.
func printApprovals(w io.Writer, fleet *v1alpha1.HostedClusterPackage, approvals []fleetApprovalOutput) error {
	if len(approvals) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Approvals:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATE\tAPPROVED REVISION\tTO APPROVE")
	for _, a := range approvals {
		revision, next := "-", "-"
		if a.Revision != "" {
			revision = printable(a.Revision)
		}
		if a.State == approvalAwaiting {
			next = "pkgsync fleet approve " + fleet.Name + " --partition " + printable(a.Partition)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", printable(a.Partition), a.State, revision, next)
	}
	return tw.Flush()
}

// printDependencies prints the fleets spec.dependsOn names, when there are any: the gate each
// member passes before it is created or moved (the members waiting are among the blocked ones).
func printDependencies(w io.Writer, deps []fleetDependencyOutput) error {
	if len(deps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Depends on (spec.dependsOn: a member is created or moved once these fleets' members on its cluster are Ready on their revision):")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FLEET\tREVISION\tWAITING\tMESSAGE")
	for _, d := range deps {
		revision, message := d.Revision, d.Message
		if revision == "" {
			revision = "-"
		}
		if message == "" {
			message = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", printable(d.Name), printable(revision), d.Waiting, printable(message))
	}
	return tw.Flush()
}

// printMemberListTitle prints a member list's title, saying when the list may be cut (the
// controller lists fleetListedMembers at most), or that it is empty; it reports whether the
// list has members to print.
func printMemberListTitle(w io.Writer, title string, n int) bool {
	fmt.Fprintln(w)
	switch {
	case n == 0:
		fmt.Fprintf(w, "%s: none\n", title)
		return false
	case n >= fleetListedMembers:
		fmt.Fprintf(w, "%s (the first %d; the counts above cover all):\n", title, n)
	default:
		fmt.Fprintf(w, "%s:\n", title)
	}
	return true
}

func printMembers(w io.Writer, fleet *v1alpha1.HostedClusterPackage, title string, ms []fleetMemberOutput) error {
	if !printMemberListTitle(w, title, len(ms)) {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPARTITION\tREASON\tMESSAGE")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", printable(m.Namespace), partitionLabel(fleet, m.Partition), printable(m.Reason), printable(m.Message))
	}
	return tw.Flush()
}

// partitionLabel names a partition in the table: the clusters without the partition label, or
// all clusters when the fleet has no partitions, have the name "".
func partitionLabel(fleet *v1alpha1.HostedClusterPackage, name string) string {
	switch {
	case name != "":
		return printable(name)
	case fleet.Spec.Rollout.Partitions == nil:
		return "(all)"
	default:
		return "(unlabelled)"
	}
}

// versionText is how a revision reads for a user: "1.4.2 (sha256:3f9c0e1a…)", the version its
// image declares beside the start of its digest, or the start of the digest alone when it
// declares none. The version is checked again here: the status is the API server's word, and
// whoever may write it may write anything within the schema's bound.
func versionText(version, digest string) string {
	short := shortDigest(digest)
	switch v := source.CleanVersion(version); {
	case v != "" && short != "":
		return v + " (" + short + ")"
	case v != "":
		return v
	}
	return short
}

// shortDigest is the algorithm and the first 8 hexadecimal digits of a digest, and an ellipsis.
func shortDigest(digest string) string {
	algorithm, hex, ok := strings.Cut(digest, ":")
	if !ok || len(hex) <= 8 {
		return printable(digest)
	}
	return printable(algorithm+":"+hex[:8]) + "…"
}

// windowText says whether a partition's maintenance window is open and until when, or when the
// next one opens.
func windowText(w *fleetWindowOutput, now time.Time) string {
	at := func(s string) string {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return "-"
		}
		return s + " (in " + duration.HumanDuration(t.Sub(now)) + ")"
	}
	switch {
	case w == nil:
		return "any time"
	case w.Open && w.ClosesAt != "":
		return "open until " + at(w.ClosesAt)
	case w.Open:
		return "open"
	case w.OpensAt != "":
		return "closed, opens " + at(w.OpensAt)
	}
	return "closed, never opens again"
}
