package controller

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// fleetMember is one selected HostedCluster and what the fleet knows of its member Package.
type fleetMember struct {
	// namespace is the hosted-control-plane namespace, where the member lives.
	namespace string
	partition string
	// labels of the HostedCluster, for config overrides.
	labels map[string]string
	// pkg is the member Package; nil when there is none yet.
	pkg *v1alpha1.Package
	// cluster is what the fleet read of the HostedCluster: its availability, its pause, its
	// annotations (a hold). Nil in tests that do not need one.
	cluster *hosted.HostedCluster
	// pending is set while the cache has not caught up with the fleet's last write of pkg.
	pending bool
}

// revision is the fleet revision the member's spec was made from ("" when none).
func (m *fleetMember) revision() string {
	if m.pkg == nil {
		return ""
	}
	return m.pkg.GetAnnotations()[v1alpha1.FleetRevisionAnnotation]
}

// holdReason returns the reason of a pkgsync.dev/hold annotation on the member's HostedCluster
// or on the member itself, and whether either holds it.
func (m *fleetMember) holdReason() (string, bool) {
	for _, from := range []struct {
		kind        string
		annotations map[string]string
	}{{"HostedCluster", m.clusterAnnotations()}, {"member Package", m.pkgAnnotations()}} {
		if why, ok := from.annotations[v1alpha1.HoldAnnotation]; ok {
			if why == "" {
				why = "no reason given"
			}
			return v1alpha1.HoldAnnotation + " on the " + from.kind + ": " + why, true
		}
	}
	return "", false
}

func (m *fleetMember) clusterAnnotations() map[string]string {
	if m.cluster == nil {
		return nil
	}
	return m.cluster.Annotations
}

func (m *fleetMember) pkgAnnotations() map[string]string {
	if m.pkg == nil {
		return nil
	}
	return m.pkg.GetAnnotations()
}

// memberHealth is what a member's status says about the revision it is on. A held or blocked
// member is never failed; ready still says what its status says.
type memberHealth struct {
	ready, failed bool
	// held: the pkgsync.dev/hold annotation keeps it where it is.
	held bool
	// blocked: it cannot move for a reason of its own cluster or namespace (blockedBy).
	blocked         bool
	reason, message string
	// pausedUntil is when the pause of a blocked member's HostedCluster ends by itself.
	pausedUntil time.Time
}

// blockingReasons are the Ready reasons of a member that say its own cluster or namespace
// stops it, whatever the revision: the hosted API server does not answer (or its circuit is
// open, or the HostedCluster is unavailable or paused), its pull Secret is missing or refused,
// its verification Secret is missing or trusts other keys (the fleet verified the digest with
// the template's before it became the target), its connector kubeconfig is refused, its
// namespace is no hosted-control-plane namespace, its ServiceAccount is missing or may not do
// what the package needs (Forbidden), or a Package its spec.dependsOn names in its namespace is
// missing or not Ready yet (DependencyNotReady: the member renders and applies nothing until
// it is). A dependency cycle is the package's own error: it stalls the member, a failure.
// Messages are never parsed: only reasons.
var blockingReasons = map[string]bool{
	v1alpha1.HostedClusterUnavailableReason: true,
	v1alpha1.AuthenticationFailedReason:     true,
	v1alpha1.VerificationFailedReason:       true,
	v1alpha1.InsecureKubeconfigReason:       true,
	v1alpha1.NotHostedControlPlaneReason:    true,
	v1alpha1.ForbiddenReason:                true,
	v1alpha1.DependencyNotReadyReason:       true,
}

// healthOf reads a member: held (by the hold annotation), blocked (blockedBy), or what its
// status says of its revision (statusHealth).
func healthOf(m *fleetMember, deadline time.Duration, now time.Time) memberHealth {
	h := statusHealth(m, deadline, now)
	if why, ok := m.holdReason(); ok {
		h.held, h.failed = true, false
		h.reason, h.message = v1alpha1.MemberHeldReason, why
		return h
	}
	if b, ok := blockedBy(m, now); ok {
		b.ready = h.ready
		return b
	}
	return h
}

// blockedBy says whether a member is blocked, and why: its HostedCluster is paused (as
// HostedCluster.PausedAt reads it) or not Available, or its Ready condition (any generation:
// the reason is about the cluster, not the spec) is False with a blocking reason.
func blockedBy(m *fleetMember, now time.Time) (memberHealth, bool) {
	if hc := m.cluster; hc != nil {
		name := hc.Namespace + "/" + hc.Name
		if paused, until := hc.PausedAt(now); paused {
			msg := "HostedCluster " + name + " is paused (ReconciliationActive=False or spec.pausedUntil)"
			if !until.IsZero() {
				msg = "HostedCluster " + name + " is paused until " + until.UTC().Format(time.RFC3339) + " (spec.pausedUntil)"
			}
			return memberHealth{blocked: true, reason: v1alpha1.HostedClusterPausedReason, message: msg, pausedUntil: until}, true
		}
		if !hc.Available {
			return memberHealth{blocked: true, reason: v1alpha1.HostedClusterUnavailableReason, message: "HostedCluster " + name + " is not Available: " + hc.Message}, true
		}
	}
	if m.pkg == nil {
		return memberHealth{}, false
	}
	if ready := conditions.Get(m.pkg, meta.ReadyCondition); ready != nil && ready.Status == metav1.ConditionFalse && blockingReasons[ready.Reason] {
		return memberHealth{blocked: true, reason: ready.Reason, message: ready.Message}, true
	}
	return memberHealth{}, false
}

// statusHealth reads a member's status. A member is Ready when its controller has seen its
// current spec and says Ready; it has failed when it is Stalled, or when it has been on its
// revision for longer than the progress deadline without becoming Ready.
func statusHealth(m *fleetMember, deadline time.Duration, now time.Time) memberHealth {
	if m.pkg == nil {
		return memberHealth{reason: v1alpha1.MemberNotCreatedReason, message: "no member Package yet"}
	}
	p := m.pkg
	ready := conditions.Get(p, meta.ReadyCondition)
	h := memberHealth{reason: v1alpha1.ProgressingReason, message: "waiting for the member's controller"}
	if ready != nil {
		h.reason, h.message = ready.Reason, ready.Message
	}
	current := p.Status.ObservedGeneration == p.Generation || (ready != nil && ready.ObservedGeneration == p.Generation)
	if current && ready != nil && ready.Status == metav1.ConditionTrue && p.Status.ObservedGeneration == p.Generation {
		h.ready = true
		return h
	}
	if current && conditions.IsStalled(p) {
		h.failed = true
		h.reason = conditions.GetReason(p, meta.StalledCondition)
		h.message = conditions.GetMessage(p, meta.StalledCondition)
		return h
	}
	if since, err := time.Parse(time.RFC3339, p.GetAnnotations()[v1alpha1.FleetRevisionTimeAnnotation]); err == nil && now.Sub(since) > deadline {
		h.failed = true
		h.message = "not Ready " + deadline.String() + " after the update (spec.rollout.progressDeadline): " + h.message
	}
	return h
}

// assignment says which revision a member should be kept at.
type assignment int

const (
	// keepAsIs leaves a member's spec alone: it is on a revision the fleet no longer holds
	// (an earlier target) and the rollout has not reached it.
	keepAsIs assignment = iota
	// toStable keeps the member on the stable revision (and creates it there).
	toStable
	// toTarget moves the member to the target revision.
	toTarget
	// noMember creates no member yet: there is no stable revision and the rollout has not
	// reached it, or the rollout is paused.
	noMember
)

// rolloutPlan is what one reconcile of a fleet decides.
type rolloutPlan struct {
	// assign maps a member's namespace to the revision it is kept at.
	assign     map[string]assignment
	partitions []v1alpha1.PartitionStatus
	current    string
	// complete: every member is Ready on the target revision, every partition done.
	complete bool
	halted   bool
	// failed members of the current partition, for the halt message.
	failed []v1alpha1.MemberStatus
	// inProgress members: on the target revision, not Ready, not failed, neither blocked nor held.
	inProgress []v1alpha1.MemberStatus
	// blocked and held members, with why.
	blocked, held []v1alpha1.MemberStatus
	// wakeAfter is when the plan changes by itself (a soak, a progress deadline or a pause
	// ends, a maintenance window opens or closes).
	wakeAfter time.Duration
	counts    v1alpha1.MemberCounts
	// rejects: the rollout halted and spec.rollout.onFailure is Rollback: the target is to be
	// rejected (status.rejected), and the plan is the rollback's (rollingBack).
	rejects bool
	// rollingBack: the plan takes the rejected revision off the members (planRollback).
	rollingBack bool
}

// planGates are what the plan decides from besides the members and the spec's strategy.
type planGates struct {
	// rejected names the revision a rollback rejected (status.rejected) while it still holds
	// (the tag resolves to it and no reconcile was requested since); "" when none.
	rejected string
	// windows are spec.rollout.windows, parsed.
	windows []fleetWindow
	// preflightFailed: spec.rollout.preflight found members the target fails for. The rollout
	// holds as a paused one does: no member moves to the target, new ones get the stable revision.
	preflightFailed bool
}

// planRollout decides, from the members' state, which revision each member is kept at.
// Partitions are walked in order; every partition before the first unfinished one is on the
// target; in that one, members that are not Ready move to the target at once (they cost no
// availability), and Ready members move and new members are created as maxUnavailable allows;
// later partitions stay where they are. Held and blocked members stand aside: they stay where
// they are, use no budget, count no failure and hold no partition back (decide). A partition
// whose maintenance windows are closed moves no member that is not on the target yet.
// With spec.rollout.onFailure Rollback and a stable revision, a halt rejects the target and
// the plan becomes its rollback (planRollback); so is the plan while gates.rejected holds. The
// plan is a function of what is observed, so a controller restart resumes it.
func planRollout(members []*fleetMember, order []string, targetName, stableName string, strategy v1alpha1.FleetRolloutStrategy,
	previous []v1alpha1.PartitionStatus, now time.Time, gates planGates) rolloutPlan {
	if gates.rejected != "" && stableName != "" && gates.rejected != stableName {
		return planRollback(members, order, gates.rejected, stableName, strategy, previous, now, gates)
	}
	p := newPlanner(targetName, stableName, strategy, previous, now, gates)
	byPartition := partitionMembers(members)
	reached := true // every partition before this one is done
	for _, name := range order {
		ms := byPartition[name]
		ps, health := p.observe(name, ms)
		reached = p.decide(&ps, ms, health, reached)
		p.record(ps, ms, health)
	}
	if p.plan.halted && strategy.GetOnFailure() == v1alpha1.FleetFailureRollback && p.rollingOut && stableName != "" {
		plan := planRollback(members, order, targetName, stableName, strategy, previous, now, gates)
		plan.rejects, plan.failed = true, p.plan.failed
		return plan
	}
	return p.plan
}

func newPlanner(targetName, stableName string, strategy v1alpha1.FleetRolloutStrategy, previous []v1alpha1.PartitionStatus, now time.Time, gates planGates) *planner {
	p := &planner{
		plan:   rolloutPlan{assign: map[string]assignment{}, complete: true},
		target: targetName, stable: stableName, rollingOut: stableName != targetName,
		strategy: strategy, deadline: strategy.GetProgressDeadline(), prevState: map[string]v1alpha1.PartitionStatus{}, now: now,
		windows: gates.windows, preflightFailed: gates.preflightFailed,
	}
	for _, ps := range previous {
		p.prevState[ps.Name] = ps
	}
	return p
}

func partitionMembers(members []*fleetMember) map[string][]*fleetMember {
	byPartition := map[string][]*fleetMember{}
	for _, m := range members {
		byPartition[m.partition] = append(byPartition[m.partition], m)
	}
	return byPartition
}

// planRollback takes a rejected revision off the members: in every partition at once, members
// on it go back to the stable revision, those not Ready at once (they cost no availability),
// Ready ones as maxUnavailable allows. Held members stay where they are; blocked ones stay
// until unblocked, then move back like the others. Members on the stable revision are kept
// there, new clusters get it, and members on an earlier target stay as they are. Maintenance
// windows do not hold a rollback. The plan is never complete: the stable revision stays, and
// the fleet waits for another digest or a reconcile request. Its counts are about the stable
// revision: updated counts the members on it.
func planRollback(members []*fleetMember, order []string, rejected, stableName string, strategy v1alpha1.FleetRolloutStrategy,
	previous []v1alpha1.PartitionStatus, now time.Time, gates planGates) rolloutPlan {
	p := newPlanner(stableName, stableName, strategy, previous, now, gates)
	p.plan.complete, p.plan.rollingBack = false, true
	byPartition := partitionMembers(members)
	for _, name := range order {
		ms := byPartition[name]
		ps, health := p.observe(name, ms)
		ps.Failed = 0
		for i, m := range ms {
			if m.revision() == rejected && health[i].failed {
				ps.Failed++
				p.plan.failed = append(p.plan.failed, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: name, Reason: health[i].reason, Message: health[i].message})
			}
		}
		budget := newUnavailableBudget(strategy.MaxUnavailable, ms, health)
		left := 0
		for i, m := range ms {
			h := health[i]
			switch {
			case m.pkg == nil && (h.held || h.blocked):
				p.plan.assign[m.namespace] = noMember
			case m.pkg == nil || m.revision() == stableName:
				p.plan.assign[m.namespace] = toStable
			case h.held || h.blocked || m.revision() != rejected:
				p.plan.assign[m.namespace] = keepAsIs
			case budget.allow(m, h):
				p.plan.assign[m.namespace] = toStable
				left++
			default:
				p.plan.assign[m.namespace] = keepAsIs
				left++
			}
		}
		ps.State = v1alpha1.PartitionRolledBack
		if left > 0 {
			ps.State = v1alpha1.PartitionRollingBack
			if p.plan.current == "" {
				p.plan.current = name
			}
		}
		p.record(ps, ms, health)
	}
	p.plan.complete = false
	return p.plan
}

// planner holds what planRollout decides from and what it has decided so far.
type planner struct {
	plan           rolloutPlan
	target, stable string
	rollingOut     bool
	strategy       v1alpha1.FleetRolloutStrategy
	deadline       time.Duration
	prevState      map[string]v1alpha1.PartitionStatus
	now            time.Time
	windows        []fleetWindow
	// preflightFailed holds the rollout (planGates).
	preflightFailed bool
	// proved: a member of this or an earlier partition is Ready on the target.
	proved bool
}

// window is the state of a partition's maintenance windows now; ok is false when none applies.
func (p *planner) window(partition string) (windowState, bool) {
	return windowAt(p.windows, partition, p.now)
}

// transition is when a partition entered state: kept from before when it was in it already.
func (p *planner) transition(name string, state v1alpha1.PartitionState) metav1.Time {
	if prev, ok := p.prevState[name]; ok && prev.State == state {
		return prev.LastTransitionTime
	}
	return metav1.NewTime(p.now.Truncate(time.Second))
}

// wake brings the time the plan changes by itself forward to d from now.
func (p *planner) wake(d time.Duration) {
	if d > 0 && (p.plan.wakeAfter == 0 || d < p.plan.wakeAfter) {
		p.plan.wakeAfter = d
	}
}

// observe counts a partition's members and reads their health.
func (p *planner) observe(name string, ms []*fleetMember) (v1alpha1.PartitionStatus, []memberHealth) {
	ps := v1alpha1.PartitionStatus{Name: name}
	health := make([]memberHealth, len(ms))
	for i, m := range ms {
		onTarget := m.revision() == p.target
		health[i] = healthOf(m, p.deadline, p.now)
		ps.Total++
		switch {
		case health[i].held:
			ps.Held++
		case health[i].blocked:
			ps.Blocked++
			if until := health[i].pausedUntil; !until.IsZero() {
				p.wake(until.Sub(p.now) + time.Second)
			}
		}
		if onTarget {
			ps.Updated++
			if health[i].failed {
				ps.Failed++
			}
		}
		if health[i].ready {
			ps.Ready++
		}
		if onTarget && health[i].inFlight() {
			if since, err := time.Parse(time.RFC3339, m.pkg.GetAnnotations()[v1alpha1.FleetRevisionTimeAnnotation]); err == nil {
				p.wake(since.Add(p.deadline).Sub(p.now) + time.Second)
			}
		}
	}
	return ps, health
}

// inFlight: the member is on its way (not Ready, not failed) and neither held nor blocked.
func (h memberHealth) inFlight() bool {
	return !h.ready && !h.failed && !h.held && !h.blocked
}

// decide sets a partition's state and its members' assignments, and reports whether the
// rollout goes on past it. reached says whether every partition before it is done.
//
// A partition is done when every member that is neither held nor blocked is Ready on the
// target: held and blocked members do not hold it (or its soak) back. One exception keeps a
// partition of blocked members from waving a revision through: while no member of it or of an
// earlier partition is Ready on the target (nothing has proved the revision yet), a partition
// with a blocked member is not done.
func (p *planner) decide(ps *v1alpha1.PartitionStatus, ms []*fleetMember, health []memberHealth, reached bool) bool {
	movableDone := true
	for i, m := range ms {
		onTarget := m.revision() == p.target
		if onTarget && health[i].ready {
			p.proved = p.proved || reached
		}
		if !health[i].held && !health[i].blocked && (!onTarget || !health[i].ready) {
			movableDone = false
		}
	}
	done := movableDone && (p.proved || ps.Blocked == 0)
	switch {
	case !reached:
		ps.State = v1alpha1.PartitionPending
		p.assignAll(ms, health, func(m *fleetMember) assignment { return keepOrStable(m, p.target, p.stable, p.rollingOut) })
		return false
	case !p.rollingOut:
		// Nothing to roll out: every member is kept on the one revision, new ones created on it,
		// and a member that was blocked or held catches up at once, as a cluster that joins,
		// unless the partition's windows are closed.
		closed := p.windowClosed(ps.Name)
		p.assignAll(ms, health, func(m *fleetMember) assignment {
			if closed && m.pkg != nil && m.revision() != p.target {
				return keepAsIs
			}
			return toTarget
		})
		ps.State = v1alpha1.PartitionComplete
		if !movableDone {
			ps.State = v1alpha1.PartitionProgressing
		}
		return true
	case done:
		p.assignAll(ms, health, func(*fleetMember) assignment { return toTarget })
		ps.State = v1alpha1.PartitionComplete
		if soak := soakOf(p.strategy); soak > 0 {
			prev, ok := p.prevState[ps.Name]
			switch {
			case ok && prev.State == v1alpha1.PartitionComplete:
			case ok && prev.State == v1alpha1.PartitionSoaking && p.now.Sub(prev.LastTransitionTime.Time) >= soak:
			default:
				ps.State = v1alpha1.PartitionSoaking
				since := p.transition(ps.Name, v1alpha1.PartitionSoaking).Time
				p.wake(since.Add(soak).Sub(p.now) + time.Second)
				p.plan.current = ps.Name
				return false
			}
		}
		return true
	}
	p.plan.current = ps.Name
	threshold := scaledCount(p.strategy.FailureThreshold, int(ps.Total), 1, true)
	for i, m := range ms {
		if m.revision() == p.target && health[i].failed {
			p.plan.failed = append(p.plan.failed, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: ps.Name, Reason: health[i].reason, Message: health[i].message})
		}
	}
	switch {
	case int(ps.Failed) >= threshold:
		ps.State = v1alpha1.PartitionHalted
		p.plan.halted = true
		p.assignAll(ms, health, func(m *fleetMember) assignment { return keepOrStable(m, p.target, p.stable, true) })
	case p.strategy.Paused || p.preflightFailed:
		ps.State = v1alpha1.PartitionProgressing
		p.assignAll(ms, health, func(m *fleetMember) assignment { return keepOrStable(m, p.target, p.stable, true) })
	case p.windowClosed(ps.Name):
		// Members moved while the window was open finish; none is moved now. A new cluster
		// still gets its first install, as maxUnavailable allows.
		ps.State = v1alpha1.PartitionProgressing
		p.moveWithinBudget(ms, health, true)
	default:
		ps.State = v1alpha1.PartitionProgressing
		p.moveWithinBudget(ms, health, false)
	}
	return false
}

// windowClosed says whether a maintenance window applies to the partition and none is open
// now; either way the plan wakes when that changes.
func (p *planner) windowClosed(partition string) bool {
	st, ok := p.window(partition)
	if !ok {
		return false
	}
	if !st.edge.IsZero() {
		p.wake(st.edge.Sub(p.now) + time.Second)
	}
	return !st.open
}

// assignAll assigns each member what to says, held and blocked members aside (standAside).
func (p *planner) assignAll(ms []*fleetMember, health []memberHealth, to func(*fleetMember) assignment) {
	for i, m := range ms {
		if a, ok := p.standAside(m, health[i]); ok {
			p.plan.assign[m.namespace] = a
			continue
		}
		p.plan.assign[m.namespace] = to(m)
	}
}

// standAside is where a held or blocked member is kept, whatever its partition's state. A held
// member is not written at all: not moved, not corrected, not created. A blocked member stays
// on the revision it has (kept on it when that is the target or the stable revision), and a
// blocked cluster without a member gets none until it is unblocked: a HostedCluster being
// created is not Available, and its namespace may not exist yet.
func (p *planner) standAside(m *fleetMember, h memberHealth) (assignment, bool) {
	switch {
	case !h.held && !h.blocked:
		return 0, false
	case m.pkg == nil:
		return noMember, true
	case h.held:
		return keepAsIs, true
	}
	return keepOrStable(m, p.target, p.stable, true), true
}

// moveWithinBudget moves the members of the partition being rolled out to the target as
// maxUnavailable allows (unavailableBudget). With closed set (a maintenance window is closed),
// only members on the target and new members are written to it.
func (p *planner) moveWithinBudget(ms []*fleetMember, health []memberHealth, closed bool) {
	budget := newUnavailableBudget(p.strategy.MaxUnavailable, ms, health)
	for i, m := range ms {
		if a, ok := p.standAside(m, health[i]); ok {
			p.plan.assign[m.namespace] = a
			continue
		}
		switch {
		case m.revision() == p.target:
			p.plan.assign[m.namespace] = toTarget
		case closed && m.pkg != nil:
			p.plan.assign[m.namespace] = keepOrStable(m, p.target, p.stable, true)
		case budget.allow(m, health[i]):
			p.plan.assign[m.namespace] = toTarget
		default:
			p.plan.assign[m.namespace] = keepOrStable(m, p.target, p.stable, true)
		}
	}
}

// record builds a decided partition's status (times, members in progress) and adds it to the
// plan's counts.
func (p *planner) record(ps v1alpha1.PartitionStatus, ms []*fleetMember, health []memberHealth) {
	if ps.State != v1alpha1.PartitionComplete {
		p.plan.complete = false
	}
	ps.LastTransitionTime = p.transition(ps.Name, ps.State)
	if st, ok := p.window(ps.Name); ok {
		ps.Window = st.status()
	}
	prev, seen := p.prevState[ps.Name]
	switch {
	case ps.State == v1alpha1.PartitionPending:
	case seen && prev.StartedAt != nil && prev.State != v1alpha1.PartitionPending &&
		(prev.State != v1alpha1.PartitionComplete || ps.State == v1alpha1.PartitionComplete):
		ps.StartedAt = prev.StartedAt
	default:
		started := metav1.NewTime(p.now.Truncate(time.Second))
		ps.StartedAt = &started
	}
	for i, m := range ms {
		st := v1alpha1.MemberStatus{Namespace: m.namespace, Partition: ps.Name, Reason: health[i].reason, Message: health[i].message}
		switch {
		case health[i].held:
			p.plan.held = append(p.plan.held, st)
		case health[i].blocked:
			p.plan.blocked = append(p.plan.blocked, st)
		case m.revision() == p.target && health[i].inFlight() && m.pkg != nil:
			p.plan.inProgress = append(p.plan.inProgress, st)
		}
	}
	p.plan.counts.Total += ps.Total
	p.plan.counts.Updated += ps.Updated
	p.plan.counts.Ready += ps.Ready
	p.plan.counts.Failed += ps.Failed
	p.plan.counts.Blocked += ps.Blocked
	p.plan.counts.Held += ps.Held
	p.plan.partitions = append(p.plan.partitions, ps)
}

// keepOrStable is where a member the rollout has not reached stays: on the stable revision,
// or as it is when it is on an earlier target, or nowhere when there is no stable revision yet.
func keepOrStable(m *fleetMember, targetName, stableName string, rollingOut bool) assignment {
	switch {
	case !rollingOut || (m.pkg != nil && m.revision() == targetName):
		return toTarget
	case stableName == "":
		if m.pkg != nil {
			return keepAsIs
		}
		return noMember
	case m.pkg == nil || m.revision() == stableName:
		return toStable
	default:
		return keepAsIs
	}
}

func soakOf(s v1alpha1.FleetRolloutStrategy) time.Duration {
	if s.Soak == nil {
		return 0
	}
	return s.Soak.Duration
}

// scaledCount resolves a count-or-percentage against total: percentages round up or down as
// asked, and the result is at least 1. Unset gives def. CRD validation refuses other forms;
// one that gets through anyway counts as def.
func scaledCount(v *intstr.IntOrString, total, def int, roundUp bool) int {
	if v == nil {
		return def
	}
	if v.Type == intstr.Int {
		return max(int(v.IntVal), 1)
	}
	pct, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil || !strings.HasSuffix(v.StrVal, "%") {
		return def
	}
	n := float64(total) * float64(pct) / 100
	if roundUp {
		return max(int(math.Ceil(n)), 1)
	}
	return max(int(math.Floor(n)), 1)
}

// partitionOrder orders the partitions present: static values first in the order given ("*"
// standing for every value not listed), then, alphanumerically, values the static list does
// not cover, and clusters without the label ("") last.
func partitionOrder(present []string, p *v1alpha1.FleetPartitions) []string {
	values := slices.Clone(present)
	slices.SortFunc(values, compareAlphanumeric)
	values = slices.Compact(values)
	unlabelled := slices.Contains(values, "")
	values = slices.DeleteFunc(values, func(s string) bool { return s == "" })
	var out []string
	if p != nil && p.Order != nil && len(p.Order.Static) > 0 {
		listed := map[string]bool{}
		for _, s := range p.Order.Static {
			listed[s] = true
		}
		var rest []string
		for _, v := range values {
			if !listed[v] {
				rest = append(rest, v)
			}
		}
		star := false
		for _, s := range p.Order.Static {
			switch {
			case s == "*":
				out = append(out, rest...)
				star = true
			case slices.Contains(values, s):
				out = append(out, s)
			}
		}
		if !star {
			out = append(out, rest...)
		}
	} else {
		out = values
	}
	if unlabelled {
		out = append(out, "")
	}
	return out
}

// compareAlphanumeric compares strings with runs of digits compared by value: "2" < "10".
func compareAlphanumeric(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if c := len(na) - len(nb); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
