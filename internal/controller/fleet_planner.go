package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

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
