package rollout

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func newPlanner(targetName, stableName string, strategy v1alpha1.FleetRolloutStrategy, previous []v1alpha1.PartitionStatus, now time.Time, gates Gates) *planner {
	p := &planner{
		plan:   Plan{Assign: map[string]assignment{}, Complete: true},
		target: targetName, stable: stableName, rollingOut: stableName != targetName,
		strategy: strategy, deadline: strategy.GetProgressDeadline(), prevState: map[string]v1alpha1.PartitionStatus{}, now: now,
		windows: gates.Windows, preflightFailed: gates.PreflightFailed, analysis: gates.Analysis, approved: gates.Approved,
		waiting:        gates.Waiting,
		clusterWindows: map[string]parsedClusterWindows{},
	}
	for _, ps := range previous {
		p.prevState[ps.Name] = ps
	}
	return p
}

// planner holds what Decide decides from and what it has decided so far.
type planner struct {
	plan           Plan
	target, stable string
	rollingOut     bool
	strategy       v1alpha1.FleetRolloutStrategy
	deadline       time.Duration
	prevState      map[string]v1alpha1.PartitionStatus
	now            time.Time
	windows        []Window
	// preflightFailed holds the rollout (Gates).
	preflightFailed bool
	// analysis is the analysis's last verdict (Gates); nil without one.
	analysis *AnalysisGate
	// approved: the partitions approved for the target (Gates).
	approved map[string]bool
	// waiting: the members that wait for the fleets spec.dependsOn names (Gates).
	waiting map[string]string
	// proved: a member of this or an earlier partition is Ready on the target.
	proved bool
	// clusterWindows are the values of the members' HostedClusters' maintenance windows
	// annotation, parsed (clusterWindowsOf).
	clusterWindows map[string]parsedClusterWindows
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
	if d > 0 && (p.plan.WakeAfter == 0 || d < p.plan.WakeAfter) {
		p.plan.WakeAfter = d
	}
}

// observe counts a partition's members and reads their health; reached says whether the
// rollout reached the partition (every one before it is done).
func (p *planner) observe(name string, ms []*Member, reached bool) (v1alpha1.PartitionStatus, []memberHealth) {
	ps := v1alpha1.PartitionStatus{Name: name}
	health := make([]memberHealth, len(ms))
	for i, m := range ms {
		onTarget := m.Revision() == p.target
		health[i] = healthOf(m, p.deadline, p.now)
		p.applyClusterWindows(m, &health[i])
		if why, waits := p.waiting[m.Namespace]; waits && !health[i].aside() && (reached || !p.rollingOut || m.Pkg == nil) {
			// Stands aside as a blocked member does: what stops it is on its own cluster.
			health[i].blocked, health[i].failed = true, false
			health[i].reason, health[i].message = v1alpha1.DependencyNotReadyReason, why
			if p.plan.Waited == nil {
				p.plan.Waited = map[string]bool{}
			}
			p.plan.Waited[m.Namespace] = true
		}
		if why, failed := p.analysisFailed(name, m.Namespace); failed && onTarget && !health[i].aside() {
			health[i].ready, health[i].failed = false, true
			health[i].reason, health[i].message = v1alpha1.AnalysisFailedReason, why
			// The checks are evaluated again at the interval: a halt they caused ends when they pass.
			p.wake(p.analysis.Interval)
		}
		ps.Total++
		switch {
		case health[i].held:
			ps.Held++
		case health[i].blocked:
			ps.Blocked++
			if until := health[i].pausedUntil; !until.IsZero() {
				p.wake(until.Sub(p.now) + time.Second)
			}
		case health[i].windowHeld:
			ps.WindowHeld++
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
			if since, err := time.Parse(time.RFC3339, m.Pkg.GetAnnotations()[v1alpha1.FleetRevisionTimeAnnotation]); err == nil {
				p.wake(since.Add(p.deadline).Sub(p.now) + time.Second)
			}
		}
	}
	return ps, health
}

// decide sets a partition's state and its members' assignments, and reports whether the
// rollout goes on past it. reached says whether every partition before it is done.
//
// A partition is done when every member that is not set aside (held, blocked, window-held) is
// Ready on the target: those do not hold it (or its soak) back. One exception keeps a
// partition of blocked or window-held members (which move by themselves once unblocked or
// once their cluster's window opens) from waving a revision through: while no member of it or
// of an earlier partition is Ready on the target (nothing has proved the revision yet), a
// partition with such a member is not done.
func (p *planner) decide(ps *v1alpha1.PartitionStatus, ms []*Member, health []memberHealth, reached bool) bool {
	movableDone := true
	for i, m := range ms {
		onTarget := m.Revision() == p.target
		if onTarget && health[i].ready {
			p.proved = p.proved || reached
		}
		if !health[i].aside() && (!onTarget || !health[i].ready) {
			movableDone = false
		}
	}
	done := movableDone && (p.proved || ps.Blocked+ps.WindowHeld == 0)
	switch {
	case !reached:
		ps.State = v1alpha1.PartitionPending
		p.assignAll(ms, health, func(m *Member) assignment { return keepOrStable(m, p.target, p.stable, p.rollingOut) })
		return false
	case !p.rollingOut:
		// Nothing to roll out: every member is kept on the one revision, new ones created on it,
		// and members that were blocked, held or window-held catch up within maxUnavailable,
		// unless the partition's windows are closed (or their cluster's: they stand aside then).
		// The budget matters most for cluster windows: many clusters share one schedule, and
		// their members would otherwise all be rewritten in the minute it opens.
		p.moveWithinBudget(ms, health, p.windowClosed(ps.Name))
		ps.State = v1alpha1.PartitionComplete
		if !movableDone {
			ps.State = v1alpha1.PartitionProgressing
		}
		return true
	case done:
		p.assignAll(ms, health, func(*Member) assignment { return ToTarget })
		return p.soak(ps)
	case p.awaitsApproval(ps):
		ps.State = v1alpha1.PartitionAwaitingApproval
		p.plan.Current, p.plan.AwaitingApproval = ps.Name, ps.Name
		p.assignAll(ms, health, func(m *Member) assignment { return keepOrStable(m, p.target, p.stable, true) })
		return false
	}
	p.plan.Current = ps.Name
	threshold := scaledCount(p.strategy.FailureThreshold, int(ps.Total), 1, true)
	for i, m := range ms {
		if m.Revision() == p.target && health[i].failed {
			p.plan.Failed = append(p.plan.Failed, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: ps.Name, Reason: health[i].reason, Message: health[i].message})
		}
	}
	switch {
	case int(ps.Failed) >= threshold:
		ps.State = v1alpha1.PartitionHalted
		p.plan.Halted = true
		p.assignAll(ms, health, func(m *Member) assignment { return keepOrStable(m, p.target, p.stable, true) })
	case p.strategy.Paused || p.preflightFailed:
		ps.State = v1alpha1.PartitionProgressing
		p.assignAll(ms, health, func(m *Member) assignment { return keepOrStable(m, p.target, p.stable, true) })
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

// soak sets the state of a partition whose members are all Ready on the target: Complete once
// it has soaked (and its analysis passed), Soaking until then; it reports whether the rollout
// goes on past it.
func (p *planner) soak(ps *v1alpha1.PartitionStatus) bool {
	ps.State = v1alpha1.PartitionComplete
	soak := soakOf(p.strategy, p.analysis)
	if soak <= 0 {
		return true
	}
	prev, ok := p.prevState[ps.Name]
	switch {
	case ok && prev.State == v1alpha1.PartitionComplete:
		return true
	case ok && prev.State == v1alpha1.PartitionSoaking && p.now.Sub(prev.LastTransitionTime.Time) >= soak && p.analysisPassed(ps.Name):
		return true
	}
	if p.strategy.Analysis != nil && p.analysis != nil {
		p.wake(p.analysis.Interval)
	}
	ps.State = v1alpha1.PartitionSoaking
	since := p.transition(ps.Name, v1alpha1.PartitionSoaking).Time
	p.wake(since.Add(soak).Sub(p.now) + time.Second)
	p.plan.Current = ps.Name
	return false
}

// awaitsApproval says whether a partition the rollout reached waits for an approval of the
// target (spec.rollout.approvalRequired): it needs one, has none, and no member of it is on the
// target yet. The last keeps a partition that started going once its approval is withdrawn or
// removed, and a cluster that joins it mid-way from stopping it.
func (p *planner) awaitsApproval(ps *v1alpha1.PartitionStatus) bool {
	return slices.Contains(p.strategy.ApprovalRequired, ps.Name) && !p.approved[ps.Name] && ps.Updated == 0
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

// assignAll assigns each member what to says, members set aside apart (standAside).
func (p *planner) assignAll(ms []*Member, health []memberHealth, to func(*Member) assignment) {
	for i, m := range ms {
		if a, ok := p.standAside(m, health[i]); ok {
			p.plan.Assign[m.Namespace] = a
			continue
		}
		p.plan.Assign[m.Namespace] = to(m)
	}
}

// standAside is where a held, blocked or window-held member is kept, whatever its partition's
// state. A held member is not written at all: not moved, not corrected, not created. A blocked
// or window-held member stays on the revision it has (kept on it, drift corrected, when that
// is the target or the stable revision), and a blocked cluster without a member gets none
// until it is unblocked: a HostedCluster being created is not Available, and its namespace may
// not exist yet. (A window-held member always has one: a first install is not held.)
func (p *planner) standAside(m *Member, h memberHealth) (assignment, bool) {
	switch {
	case !h.aside():
		return 0, false
	case m.Pkg == nil:
		return noMember, true
	case h.held:
		return keepAsIs, true
	}
	return keepOrStable(m, p.target, p.stable, true), true
}

// moveWithinBudget moves the members of the partition being rolled out to the target as
// maxUnavailable allows (unavailableBudget). With closed set (a maintenance window is closed),
// only members on the target and new members are written to it.
func (p *planner) moveWithinBudget(ms []*Member, health []memberHealth, closed bool) {
	budget := newUnavailableBudget(p.strategy.MaxUnavailable, ms, health)
	for i, m := range ms {
		if a, ok := p.standAside(m, health[i]); ok {
			p.plan.Assign[m.Namespace] = a
			continue
		}
		switch {
		case m.Revision() == p.target:
			p.plan.Assign[m.Namespace] = ToTarget
		case closed && m.Pkg != nil:
			p.plan.Assign[m.Namespace] = keepOrStable(m, p.target, p.stable, true)
		case budget.allow(m, health[i]):
			p.plan.Assign[m.Namespace] = ToTarget
		default:
			p.plan.Assign[m.Namespace] = keepOrStable(m, p.target, p.stable, true)
		}
	}
}

// record builds a decided partition's status (times, members in progress) and adds it to the
// plan's counts.
func (p *planner) record(ps v1alpha1.PartitionStatus, ms []*Member, health []memberHealth) {
	if ps.State != v1alpha1.PartitionComplete {
		p.plan.Complete = false
	}
	ps.LastTransitionTime = p.transition(ps.Name, ps.State)
	if st, ok := p.window(ps.Name); ok {
		ps.Window = st.status()
	}
	prev, seen := p.prevState[ps.Name]
	switch {
	case ps.State == v1alpha1.PartitionPending || ps.State == v1alpha1.PartitionAwaitingApproval:
	case seen && prev.StartedAt != nil && prev.State != v1alpha1.PartitionPending && prev.State != v1alpha1.PartitionAwaitingApproval &&
		(prev.State != v1alpha1.PartitionComplete || ps.State == v1alpha1.PartitionComplete):
		ps.StartedAt = prev.StartedAt
	default:
		started := metav1.NewTime(p.now.Truncate(time.Second))
		ps.StartedAt = &started
	}
	for i, m := range ms {
		st := v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: ps.Name, Reason: health[i].reason, Message: health[i].message}
		switch {
		case health[i].held:
			p.plan.Held = append(p.plan.Held, st)
		case health[i].blocked:
			p.plan.Blocked = append(p.plan.Blocked, st)
		case health[i].windowHeld:
			held := v1alpha1.WindowHeldMemberStatus{MemberStatus: st}
			if !health[i].opensAt.IsZero() {
				at := metav1.NewTime(health[i].opensAt.UTC())
				held.OpensAt = &at
			}
			p.plan.WindowHeld = append(p.plan.WindowHeld, held)
		case m.Revision() == p.target && health[i].inFlight() && m.Pkg != nil:
			p.plan.InProgress = append(p.plan.InProgress, st)
		}
	}
	p.plan.Counts.Total += ps.Total
	p.plan.Counts.Updated += ps.Updated
	p.plan.Counts.Ready += ps.Ready
	p.plan.Counts.Failed += ps.Failed
	p.plan.Counts.Blocked += ps.Blocked
	p.plan.Counts.Held += ps.Held
	p.plan.Counts.WindowHeld += ps.WindowHeld
	p.plan.Partitions = append(p.plan.Partitions, ps)
}

// analysisFailed says whether the analysis failed the member of a partition, and why.
func (p *planner) analysisFailed(partition, namespace string) (string, bool) {
	if p.analysis == nil || p.analysis.Partition != partition {
		return "", false
	}
	why, failed := p.analysis.Failed[namespace]
	return why, failed
}

// analysisPassed says whether a soaking partition's checks let it end: every check passed
// after its soak began, or there is no analysis.
func (p *planner) analysisPassed(partition string) bool {
	if p.strategy.Analysis == nil {
		return true
	}
	return p.analysis != nil && p.analysis.Partition == partition && p.analysis.Passed
}
