package fleet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// setStatus sets the fleet's status from the plan, with events and metrics for what changed; the
// lifecycle's report writes it.
func (r *fleetSteps) setStatus(fleet *v1alpha1.HostedClusterPackage, plan rollout.Plan, problems []v1alpha1.MemberStatus, now time.Time) {
	st := &fleet.Status
	r.announcePartitions(fleet, st.Partitions, plan.Partitions, now)
	windowHeld := boundedWindowHeld(plan.WindowHeld)
	r.announceWindowHeld(fleet, st.WindowHeldMembers, windowHeld)
	st.WindowHeldMembers = windowHeld
	st.Partitions = plan.Partitions
	st.MemberCounts = plan.Counts
	st.Progress = fmt.Sprintf("%d/%d/%d", plan.Counts.Updated, plan.Counts.Ready, plan.Counts.Total)
	st.CurrentPartition = plan.Current
	st.InProgress = bounded(plan.InProgress)
	st.FailedMembers = bounded(append(slices.Clone(plan.Failed), problems...))
	st.BlockedMembers = bounded(plan.Blocked)
	st.HeldMembers = bounded(plan.Held)
	for state, n := range map[string]int32{"total": plan.Counts.Total, "updated": plan.Counts.Updated, "ready": plan.Counts.Ready, "failed": plan.Counts.Failed,
		"blocked": plan.Counts.Blocked, "held": plan.Counts.Held, "window_held": plan.Counts.WindowHeld} {
		r.own.FleetMembers.WithLabelValues(fleet.Name, state).Set(float64(n))
	}
	if plan.Complete && (st.Stable == nil || st.Stable.Name != st.Target.Name) {
		st.Stable = &v1alpha1.FleetStableRevision{FleetRevision: *st.Target, Template: *fleet.Spec.Template.DeepCopy()}
		for _, o := range fleet.Spec.ConfigOverrides {
			st.Stable.ConfigOverrides = append(st.Stable.ConfigOverrides, *o.DeepCopy())
		}
	}
}

// fleetOutcome is what the plan and the members that could not be kept make of the fleet's
// conditions.
func fleetOutcome(fleet *v1alpha1.HostedClusterPackage, plan rollout.Plan, problems []v1alpha1.MemberStatus) reconciler.Outcome {
	target, progress := fleet.Status.Target.Name, fleet.Status.Progress
	where := ""
	if plan.Current != "" {
		where = fmt.Sprintf("partition %s: ", partitionName(plan.Current))
	}
	switch {
	case plan.RollingBack:
		return rollbackOutcome(fleet, plan)
	case plan.Halted:
		return reconciler.Outcome{State: reconciler.OutcomeStalled, Reason: v1alpha1.RolloutHaltedReason, Message: fmt.Sprintf("rollout of %s halted in partition %s: %d member(s) failed (spec.rollout.failureThreshold): %s",
			target, partitionName(plan.Current), len(plan.Failed), describeMembers(plan.Failed))}
	case plan.Counts.Total == 0 && len(problems) == 0:
		return reconciler.Outcome{State: reconciler.OutcomeSucceeded, Message: "no HostedCluster matches spec.hostedClusterSelector: 0 members"}
	case len(problems) > 0:
		return reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.MembersFailedReason, Message: fmt.Sprintf("%d member(s) cannot be kept: %s", len(problems), describeMembers(problems))}
	case plan.Complete && plan.Counts.WindowHeld > 0:
		c := plan.Counts
		return reconciler.Outcome{State: reconciler.OutcomeSucceeded, Message: fmt.Sprintf(
			"%d member(s) Ready on revision %s; %d blocked, %d held, %d waiting for a maintenance window of their HostedCluster (status.blockedMembers, status.heldMembers, status.windowHeldMembers): each moves once unblocked, released or its cluster's window opens",
			c.Total-c.Blocked-c.Held-c.WindowHeld, target, c.Blocked, c.Held, c.WindowHeld)}
	case plan.Complete && plan.Counts.Blocked+plan.Counts.Held > 0:
		return reconciler.Outcome{State: reconciler.OutcomeSucceeded, Message: fmt.Sprintf("%d member(s) Ready on revision %s; %d blocked, %d held (status.blockedMembers, status.heldMembers): each moves once unblocked or released",
			plan.Counts.Total-plan.Counts.Blocked-plan.Counts.Held, target, plan.Counts.Blocked, plan.Counts.Held)}
	case plan.Complete:
		return reconciler.Outcome{State: reconciler.OutcomeSucceeded, Message: fmt.Sprintf("%d member(s) Ready on revision %s", plan.Counts.Total, target)}
	case plan.AwaitingApproval != "":
		p := plan.AwaitingApproval
		return reconciler.Outcome{State: reconciler.OutcomeWaiting, Reason: v1alpha1.AwaitingApprovalReason, Message: fmt.Sprintf(
			"partition %s waits for an approval of revision %s (spec.rollout.approvalRequired): pkgsync fleet approve %s --partition %s, or annotate the HostedClusterPackage %s%s=%s; %s updated/ready/total",
			p, target, fleet.Name, p, v1alpha1.ApprovePartitionPrefix, p, target, progress)}
	case fleet.Spec.Rollout.Paused:
		return reconciler.Outcome{State: reconciler.OutcomeWaiting, Reason: v1alpha1.RolloutPausedReason, Message: fmt.Sprintf("%srollout of %s paused (spec.rollout.paused): %s updated/ready/total", where, target, progress)}
	default:
		return reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.RolloutProgressingReason, Message: fmt.Sprintf("%srolling out %s: %s updated/ready/total", where, target, progress)}
	}
}

// rollbackOutcome says where the rollback of a rejected revision is: moving members back, or
// done and waiting for another digest or a reconcile request.
func rollbackOutcome(fleet *v1alpha1.HostedClusterPackage, plan rollout.Plan) reconciler.Outcome {
	rejected, stable := fleet.Status.Rejected, stableName(fleet)
	name, why := "", ""
	if rejected != nil {
		name, why = rejected.Name, rejected.Message
	}
	if plan.Current != "" {
		return reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: v1alpha1.RollingBackReason, Message: fmt.Sprintf(
			"revision %s rejected (spec.rollout.onFailure=Rollback): partition %s: moving members back to stable revision %s, %s updated/ready/total: %s",
			name, partitionName(plan.Current), stable, fleet.Status.Progress, why)}
	}
	aside := ""
	if n := plan.Counts.Blocked + plan.Counts.Held; n > 0 {
		aside = fmt.Sprintf(" (%d blocked or held member(s) stay where they are until unblocked or released)", n)
	}
	return reconciler.Outcome{State: reconciler.OutcomeStalled, Reason: v1alpha1.RolledBackReason, Message: fmt.Sprintf(
		"revision %s rejected (spec.rollout.onFailure=Rollback): members are back on stable revision %s%s; it is not rolled out again until the tag resolves to another digest or a reconcile is requested: %s",
		name, stable, aside, why)}
}

// announcePartitions emits an event per partition transition: start, finish, halt, resume,
// an approval awaited and given.
func (r *fleetSteps) announcePartitions(fleet *v1alpha1.HostedClusterPackage, before, after []v1alpha1.PartitionStatus, now time.Time) {
	old := map[string]v1alpha1.PartitionStatus{}
	for _, p := range before {
		old[p.Name] = p
	}
	target := fleet.Status.Target.Name
	for _, p := range after {
		prev, seen := old[p.Name]
		if seen && prev.State == p.State {
			continue
		}
		name := partitionName(p.Name)
		switch p.State {
		case v1alpha1.PartitionAwaitingApproval:
			r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.AwaitingApprovalReason, "partition %s waits for an approval of %s: pkgsync fleet approve %s --partition %s",
				name, target, fleet.Name, p.Name)
		case v1alpha1.PartitionProgressing:
			if seen && prev.State == v1alpha1.PartitionAwaitingApproval {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.ApprovalGivenReason, "partition %s: %s approved, rolling it out", name, target)
			} else if seen && prev.State == v1alpha1.PartitionHalted {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.RolloutResumedReason, "partition %s: rollout of %s resumed", name, target)
			} else {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.PartitionStartedReason, "partition %s: rolling out %s", name, target)
			}
		case v1alpha1.PartitionHalted:
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, v1alpha1.RolloutHaltedReason, "partition %s: rollout of %s halted", name, target)
		case v1alpha1.PartitionRollingBack:
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, v1alpha1.RollingBackReason, "partition %s: moving members back to stable revision %s", name, stableName(fleet))
		case v1alpha1.PartitionComplete:
			if seen && prev.State != v1alpha1.PartitionPending {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.PartitionCompleteReason, "partition %s: every member Ready on %s", name, target)
				if p.StartedAt != nil {
					r.own.PartitionDuration.WithLabelValues(fleet.Name).Observe(now.Sub(p.StartedAt.Time).Seconds())
				}
			}
		}
	}
}

func partitionName(name string) string {
	if name == "" {
		return "(unlabelled)"
	}
	return name
}

func describeMembers(ms []v1alpha1.MemberStatus) string {
	parts := make([]string, 0, min(len(ms), 3))
	for i, m := range ms {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ms)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %s: %s", m.Namespace, m.Reason, m.Message))
	}
	return strings.Join(parts, "; ")
}

// boundedWindowHeld is bounded for the members a HostedCluster's maintenance windows hold.
func boundedWindowHeld(ms []v1alpha1.WindowHeldMemberStatus) []v1alpha1.WindowHeldMemberStatus {
	return boundedList(ms, func(m *v1alpha1.WindowHeldMemberStatus) *string { return &m.Message })
}

// announceWindowHeld emits an event for each member listed as waiting for its HostedCluster's
// maintenance windows that was not listed so, with the same reason and message, before: a
// Warning when the cluster's annotation cannot be read (the message says what is wrong and
// how to fix it), a Normal event when the member starts waiting. Only listed members are
// announced, so a reconcile emits at most maxListedMembers such events, and only on a change.
func (r *fleetSteps) announceWindowHeld(fleet *v1alpha1.HostedClusterPackage, before, after []v1alpha1.WindowHeldMemberStatus) {
	type entry struct{ namespace, reason, message string }
	seen := map[entry]bool{}
	for _, m := range before {
		seen[entry{m.Namespace, m.Reason, m.Message}] = true
	}
	for _, m := range after {
		switch {
		case seen[entry{m.Namespace, m.Reason, m.Message}]:
		case m.Reason == v1alpha1.InvalidClusterWindowsReason:
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, m.Reason, "member %s: %s", m.Namespace, m.Message)
		default:
			r.recorder.Eventf(fleet, corev1.EventTypeNormal, m.Reason, "member %s: %s", m.Namespace, m.Message)
		}
	}
}

// bounded keeps the first maxListedMembers members, each message bounded the way condition
// messages are (reconciler.BoundMessage).
func bounded(ms []v1alpha1.MemberStatus) []v1alpha1.MemberStatus {
	return boundedList(ms, func(m *v1alpha1.MemberStatus) *string { return &m.Message })
}

// boundedList keeps the first maxListedMembers entries, the message of each bounded.
func boundedList[T any](ms []T, message func(*T) *string) []T {
	if len(ms) > maxListedMembers {
		ms = ms[:maxListedMembers]
	}
	for i := range ms {
		m := message(&ms[i])
		*m = reconciler.BoundMessage(*m, maxMemberMessage)
	}
	return ms
}
