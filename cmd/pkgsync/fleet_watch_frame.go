package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	fleets "pkgsync.dev/pkgsync/internal/fleet"
)

// fleetView is what both renderings show of a fleet and its members.
type fleetView struct {
	fleet *v1alpha1.HostedClusterPackage
	// partitionOf names the partition of the members the fleet's status lists.
	partitionOf map[string]string
	// listed are the members the status lists as failed, blocked, held or window-held: not in
	// flight.
	listed map[string]bool
	// members sorted by namespace.
	members []v1alpha1.Package
}

func newFleetView(fleet *v1alpha1.HostedClusterPackage, members []v1alpha1.Package) fleetView {
	v := fleetView{fleet: fleet, partitionOf: map[string]string{}, listed: map[string]bool{}}
	st := &fleet.Status
	for _, list := range [][]v1alpha1.MemberStatus{st.InProgress, st.FailedMembers, st.BlockedMembers, st.HeldMembers} {
		for _, m := range list {
			v.partitionOf[m.Namespace] = m.Partition
		}
	}
	for _, list := range [][]v1alpha1.MemberStatus{st.FailedMembers, st.BlockedMembers, st.HeldMembers} {
		for _, m := range list {
			v.listed[m.Namespace] = true
		}
	}
	for _, m := range st.WindowHeldMembers {
		v.partitionOf[m.Namespace] = m.Partition
		v.listed[m.Namespace] = true
	}
	for _, m := range members {
		// The label selects them; the fleet's UID (annotated, and in an ownerReference with
		// deletionPolicy Delete) is its word that they are its own.
		if fleets.IsFleetMember(&m, fleet) {
			v.members = append(v.members, m)
		}
	}
	slices.SortFunc(v.members, func(a, b v1alpha1.Package) int { return strings.Compare(a.Namespace, b.Namespace) })
	return v
}

// memberDigest is the digest a member's spec pins.
func memberDigest(m *v1alpha1.Package) string {
	if _, digest, ok := strings.Cut(m.Spec.Image, "@"); ok {
		return digest
	}
	return ""
}

// memberDone: the member is Ready on the digest its spec pins, for its latest spec.
func memberDone(m *v1alpha1.Package) bool {
	ready := apimeta.FindStatusCondition(m.Status.Conditions, meta.ReadyCondition)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == m.Generation &&
		m.Status.ObservedGeneration == m.Generation && m.Status.LastAppliedRevision == memberDigest(m)
}

// memberState is the member's revision, as a user reads it, and its Ready condition.
func memberState(m *v1alpha1.Package) (revision, ready string) {
	digest := memberDigest(m)
	version := ""
	if m.Status.LastAttemptedRevision == digest {
		version = m.Status.LastAttemptedVersion
	}
	revision = versionText(version, digest)
	if name := m.Annotations[v1alpha1.FleetRevisionAnnotation]; name != "" {
		revision += " " + printable(name)
	}
	ready = "Ready=Unknown (not reported yet)"
	if c := apimeta.FindStatusCondition(m.Status.Conditions, meta.ReadyCondition); c != nil {
		ready = fmt.Sprintf("Ready=%s %s: %s", c.Status, printable(c.Reason), printable(c.Message))
	}
	return revision, ready
}

// revisionLine is how the frame and the lines name a revision.
func revisionLine(r *v1alpha1.FleetRevision) string {
	if r == nil {
		return "none"
	}
	return versionText(r.Version, r.Digest) + " " + printable(r.Name)
}

// countdown is a duration as a countdown reads: to the second, never negative.
func countdown(d time.Duration) string {
	return max(d, 0).Truncate(time.Second).String()
}

// partitionTiming is the soak or maintenance window of a partition: with a countdown from now
// for the frame (exact false), or with the time it ends for the lines (exact true).
func partitionTiming(fleet *v1alpha1.HostedClusterPackage, p *v1alpha1.PartitionStatus, now time.Time, exact bool) string {
	at := func(t time.Time) string {
		if exact {
			return "at " + rfc3339(t)
		}
		return "in " + countdown(t.Sub(now))
	}
	var parts []string
	if p.State == v1alpha1.PartitionSoaking && fleet.Spec.Rollout.Soak != nil {
		parts = append(parts, "soak ends "+at(p.LastTransitionTime.Add(fleet.Spec.Rollout.Soak.Duration)))
	}
	if w := p.Window; w != nil {
		switch {
		case w.Open && w.ClosesAt != nil:
			parts = append(parts, "window closes "+at(w.ClosesAt.Time))
		case w.Open:
			parts = append(parts, "window open")
		case w.OpensAt != nil:
			parts = append(parts, "window opens "+at(w.OpensAt.Time))
		default:
			parts = append(parts, "window closed, never opens again")
		}
	}
	return strings.Join(parts, ", ")
}

// countsText is "3/1/3" and the failed, blocked, held and window-held members when there are any.
func countsText(c v1alpha1.MemberCounts) string {
	s := fmt.Sprintf("%d/%d/%d", c.Updated, c.Ready, c.Total)
	var marks []string
	for _, m := range []struct {
		n    int32
		what string
	}{{c.Failed, "failed"}, {c.Blocked, "blocked"}, {c.Held, "held"}, {c.WindowHeld, "window-held"}} {
		if m.n > 0 {
			marks = append(marks, fmt.Sprintf("%d %s", m.n, m.what))
		}
	}
	if len(marks) > 0 {
		s += " (" + strings.Join(marks, ", ") + ")"
	}
	return s
}

// progressBar draws a partition's members in width cells: # updated, x failed (on the target),
// ! blocked or held (by an annotation or by their cluster's window), . the rest.
func progressBar(c v1alpha1.MemberCounts, width int) string {
	if c.Total <= 0 {
		return "[" + strings.Repeat(" ", width) + "]"
	}
	cells := func(n int32) int {
		if n <= 0 {
			return 0
		}
		return max(1, int((int64(n)*int64(width)+int64(c.Total)/2)/int64(c.Total)))
	}
	updated := min(cells(c.Updated), width)
	failed := min(cells(c.Failed), updated)
	stuck := min(cells(c.Blocked+c.Held+c.WindowHeld), width-updated)
	rest := width - updated - stuck
	return "[" + strings.Repeat("#", updated-failed) + strings.Repeat("x", failed) + strings.Repeat(".", rest) + strings.Repeat("!", stuck) + "]"
}

// clip cuts s to width characters, marking the cut.
func clip(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:max(width-1, 0)]) + "…"
}

// renderFleetFrame is the terminal frame of a fleet and its members at now, width characters
// wide. It is a function of its arguments only, so a frame can be compared with a golden file.
func renderFleetFrame(fleet *v1alpha1.HostedClusterPackage, members []v1alpha1.Package, now time.Time, width int) string {
	width = max(width, watchMinWidth)
	v := newFleetView(fleet, members)
	st := &fleet.Status
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, clip(fmt.Sprintf(format, args...), width)) }

	add("Fleet %s  (watching; Ctrl-C stops)", printable(fleet.Name))
	add("Target  %s", revisionLine(st.Target))
	if len(st.TargetAppliedFrom) > 0 {
		add("        served from %s", appliedFromText(st.TargetAppliedFrom))
	}
	add("Stable  %s", revisionLine(fleetStable(fleet)))
	if r := st.Rejected; r != nil {
		add("Rejected  %s: %s", revisionLine(&r.FleetRevision), printable(r.Reason))
	}
	ready := "Unknown (no Ready condition yet)"
	if c := apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition); c != nil {
		ready = fmt.Sprintf("%s  %s: %s", c.Status, printable(c.Reason), printable(c.Message))
	}
	add("Ready   %s", ready)
	switch {
	case fleet.Spec.Suspend:
		add("Rollout suspended (spec.suspend)")
	case fleet.Spec.Rollout.Paused:
		add("Rollout paused (spec.rollout.paused)")
	}
	add("")

	if len(st.Partitions) == 0 {
		add("Partitions: none yet")
	}
	nameWidth := 0
	for _, p := range st.Partitions {
		nameWidth = max(nameWidth, utf8.RuneCountInString(partitionLabel(fleet, p.Name)))
	}
	nameWidth = min(nameWidth, 24)
	barWidth := min(max(width-nameWidth-40, 10), 40)
	for i := range st.Partitions {
		p := &st.Partitions[i]
		label := clip(partitionLabel(fleet, p.Name), nameWidth)
		line := fmt.Sprintf("%-*s %s %-11s %s", nameWidth, label, progressBar(p.MemberCounts, barWidth), p.State, countsText(p.MemberCounts))
		t := partitionTiming(fleet, p, now, false)
		switch {
		case t == "":
			add("%s", line)
		case utf8.RuneCountInString(line)+2+utf8.RuneCountInString(t) <= width:
			add("%s  %s", line, t)
		default:
			// Narrow: the countdown goes on a line of its own, under the state.
			add("%s", line)
			add("%*s%s", nameWidth+barWidth+4, "", t)
		}
	}
	add("%-*s %s", nameWidth, "", "updated/ready/total   # updated  x failed  ! blocked or held")
	add("")

	var inFlight []*v1alpha1.Package
	for i := range v.members {
		m := &v.members[i]
		if !memberDone(m) && !v.listed[m.Namespace] {
			inFlight = append(inFlight, m)
		}
	}
	if len(inFlight) == 0 {
		add("In flight: none")
	} else {
		add("In flight (%d of %d members):", len(inFlight), len(v.members))
	}
	for i, m := range inFlight {
		if i == watchInFlight {
			add("  … and %d more", len(inFlight)-watchInFlight)
			break
		}
		revision, ready := memberState(m)
		where := ""
		if p, ok := v.partitionOf[m.Namespace]; ok {
			where = " (" + partitionLabel(fleet, p) + ")"
		}
		add("  %s%s  %s  %s", printable(m.Namespace), where, revision, ready)
	}
	for _, group := range []struct {
		title string
		ms    []v1alpha1.MemberStatus
		n     int32
	}{{"Failed", st.FailedMembers, st.Failed}, {"Blocked", st.BlockedMembers, st.Blocked}, {"Held", st.HeldMembers, st.Held}} {
		if len(group.ms) == 0 {
			continue
		}
		add("%s (%d):", group.title, max(group.n, int32(len(group.ms))))
		for _, m := range group.ms {
			add("  %s  %s: %s", printable(m.Namespace), printable(m.Reason), printable(m.Message))
		}
	}
	if len(st.WindowHeldMembers) > 0 {
		add("Waiting for their cluster's window (%d):", max(st.WindowHeld, int32(len(st.WindowHeldMembers))))
		for _, m := range st.WindowHeldMembers {
			opens := ""
			if m.OpensAt != nil {
				opens = " opens in " + countdown(m.OpensAt.Sub(now)) + ";"
			}
			add("  %s  %s:%s %s", printable(m.Namespace), printable(m.Reason), opens, printable(m.Message))
		}
	}
	add("")
	add("%s", now.UTC().Format(time.RFC3339))
	return strings.Join(lines, "\n") + "\n"
}

// fleetStable is the stable revision's FleetRevision, nil when there is none.
func fleetStable(fleet *v1alpha1.HostedClusterPackage) *v1alpha1.FleetRevision {
	if fleet.Status.Stable == nil {
		return nil
	}
	return &fleet.Status.Stable.FleetRevision
}

// renderFleetLines is the plain rendering of a fleet and its members: a line for the fleet,
// one per partition and one per member, each keyed by what it is about. The watch prints the
// lines whose text changed. It is a function of its arguments only, and reads no clock: the
// soak and window times are printed as times, not as countdowns.
func renderFleetLines(fleet *v1alpha1.HostedClusterPackage, members []v1alpha1.Package) []watchLine {
	v := newFleetView(fleet, members)
	st := &fleet.Status
	ready := "Ready=Unknown"
	if c := apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition); c != nil {
		ready = fmt.Sprintf("Ready=%s %s: %s", c.Status, printable(c.Reason), printable(c.Message))
	}
	head := fmt.Sprintf("fleet %s: target %s, stable %s, %s updated/ready/total, %s",
		printable(fleet.Name), revisionLine(st.Target), revisionLine(fleetStable(fleet)), countsText(st.MemberCounts), ready)
	lines := []watchLine{{key: "fleet", text: head}}
	for i := range st.Partitions {
		p := &st.Partitions[i]
		text := fmt.Sprintf("partition %s: %s, %s updated/ready/total", partitionLabel(fleet, p.Name), p.State, countsText(p.MemberCounts))
		if t := partitionTiming(fleet, p, time.Time{}, true); t != "" {
			text += ", " + t
		}
		lines = append(lines, watchLine{key: "partition " + p.Name, text: text})
	}
	for i := range v.members {
		m := &v.members[i]
		revision, ready := memberState(m)
		lines = append(lines, watchLine{key: "member " + printable(m.Namespace),
			text: fmt.Sprintf("member %s: %s, %s", printable(m.Namespace), revision, ready)})
	}
	return lines
}
