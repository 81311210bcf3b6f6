package rollout

import (
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// Member is one selected HostedCluster and what the fleet knows of its member Package.
type Member struct {
	// Namespace is the hosted-control-plane namespace, where the member lives.
	Namespace string
	Partition string
	// Labels of the HostedCluster, for config overrides.
	Labels map[string]string
	// Pkg is the member Package; nil when there is none yet.
	Pkg *v1alpha1.Package
	// Cluster is what the fleet read of the HostedCluster: its availability, its pause, its
	// annotations (a hold). Nil in tests that do not need one.
	Cluster *hosted.HostedCluster
	// Pending is set while the cache has not caught up with the fleet's last write of pkg.
	Pending bool
}

// Revision is the fleet revision the member's spec was made from ("" when none).
func (m *Member) Revision() string {
	if m.Pkg == nil {
		return ""
	}
	return m.Pkg.GetAnnotations()[v1alpha1.FleetRevisionAnnotation]
}

// holdReason returns the reason of a pkgsync.dev/hold annotation on the member's HostedCluster
// or on the member itself, and whether either holds it.
func (m *Member) holdReason() (string, bool) {
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

func (m *Member) clusterAnnotations() map[string]string {
	if m.Cluster == nil {
		return nil
	}
	return m.Cluster.Annotations
}

func (m *Member) pkgAnnotations() map[string]string {
	if m.Pkg == nil {
		return nil
	}
	return m.Pkg.GetAnnotations()
}

// assignment says which revision a member should be kept at.
type assignment int

const (
	// keepAsIs leaves a member's spec alone: it is on a revision the fleet no longer holds
	// (an earlier target) and the rollout has not reached it.
	keepAsIs assignment = iota
	// ToStable keeps the member on the stable revision (and creates it there).
	ToStable
	// ToTarget moves the member to the target revision.
	ToTarget
	// noMember creates no member yet: there is no stable revision and the rollout has not
	// reached it, or the rollout is paused.
	noMember
)

// Plan is what one reconcile of a fleet decides.
type Plan struct {
	// Assign maps a member's namespace to the revision it is kept at.
	Assign     map[string]assignment
	Partitions []v1alpha1.PartitionStatus
	Current    string
	// Complete: every member is Ready on the target revision, every partition done.
	Complete bool
	Halted   bool
	// Failed members of the current partition, for the halt message.
	Failed []v1alpha1.MemberStatus
	// InProgress members: on the target revision, not Ready, not failed, not set aside.
	InProgress []v1alpha1.MemberStatus
	// Blocked and held members, with why.
	Blocked, Held []v1alpha1.MemberStatus
	// WindowHeld members: their HostedCluster's maintenance windows keep them where they are
	// (ParseClusterWindows), with why and when the next window opens.
	WindowHeld []v1alpha1.WindowHeldMemberStatus
	// WakeAfter is when the plan changes by itself (a soak, a progress deadline or a pause
	// ends, a maintenance window of a partition or of a member's cluster opens or closes).
	WakeAfter time.Duration
	Counts    v1alpha1.MemberCounts
	// Rejects: the rollout halted and spec.rollout.onFailure is Rollback: the target is to be
	// rejected (status.rejected), and the plan is the rollback's (rollingBack).
	Rejects bool
	// AwaitingApproval names the partition that waits for an approval of the target
	// (spec.rollout.approvalRequired); "" when none does.
	AwaitingApproval string
	// RollingBack: the plan takes the rejected revision off the members (planRollback).
	RollingBack bool
	// Waited are the namespaces of the members Gates.Waiting set aside (reason
	// DependencyNotReady): those that would have been written to another revision in this pass.
	Waited map[string]bool
}

// Gates are what the plan decides from besides the members and the spec's strategy.
type Gates struct {
	// Rejected names the revision a rollback rejected (status.rejected) while it still holds
	// (the tag resolves to it and no reconcile was requested since); "" when none.
	Rejected string
	// Windows are spec.rollout.windows, parsed.
	Windows []Window
	// PreflightFailed: spec.rollout.preflight found members the target fails for. The rollout
	// holds as a paused one does: no member moves to the target, new ones get the stable revision.
	PreflightFailed bool
	// Analysis is spec.rollout.analysis's last verdict (internal/fleet/analysis); nil without
	// an analysis. With an analysis and no verdict for a soaking partition, its soak does not end.
	Analysis *AnalysisGate
	// Approved are the partitions an approval names the target for (approve.pkgsync.dev/<partition>
	// on the fleet, its value the target's name).
	Approved map[string]bool
	// Waiting maps the namespace of a member that waits for the fleets spec.dependsOn names to
	// why: it is blocked (reason DependencyNotReady) unless it is set aside already, or is a
	// member in a partition the rollout has not reached (it is kept where it is anyway); a
	// cluster without a member waits wherever it is.
	Waiting map[string]string
}

// AnalysisGate is the last verdict of spec.rollout.analysis, for the partition it was
// evaluated for.
type AnalysisGate struct {
	Partition string
	// Failed maps the namespace of a member a check failed to why: it counts as a failed
	// member of its partition (reason AnalysisFailed) while it is on the target.
	Failed map[string]string
	// Passed: every check passed in an evaluation after the partition's current soak began.
	Passed bool
	// Interval is how often the checks are evaluated: the soak is at least one, and a soak
	// that waits for the checks wakes at it.
	Interval time.Duration
}

// Decide decides, from the members' state, which revision each member is kept at.
// Partitions are walked in order; every partition before the first unfinished one is on the
// target; in that one, members that are not Ready move to the target at once (they cost no
// availability), and Ready members move and new members are created as maxUnavailable allows;
// later partitions stay where they are. Held, blocked and window-held members stand aside: they
// stay where they are, use no budget, count no failure and hold no partition back (decide). A
// partition whose maintenance windows are closed moves no member that is not on the target
// yet, and neither does a member whose HostedCluster's windows are closed: that member is
// window-held (applyClusterWindows). A
// partition spec.rollout.approvalRequired lists waits, once reached, until gates.Approved
// names it (awaitsApproval).
// With spec.rollout.onFailure Rollback and a stable revision, a halt rejects the target and
// the plan becomes its rollback (planRollback); so is the plan while gates.rejected holds. The
// plan is a function of what is observed, so a controller restart resumes it.
func Decide(members []*Member, order []string, targetName, stableName string, strategy v1alpha1.FleetRolloutStrategy,
	previous []v1alpha1.PartitionStatus, now time.Time, gates Gates) Plan {
	if gates.Rejected != "" && stableName != "" && gates.Rejected != stableName {
		return planRollback(members, order, gates.Rejected, stableName, strategy, previous, now, gates)
	}
	p := newPlanner(targetName, stableName, strategy, previous, now, gates)
	byPartition := partitionMembers(members)
	reached := true // every partition before this one is done
	for _, name := range order {
		ms := byPartition[name]
		ps, health := p.observe(name, ms, reached)
		reached = p.decide(&ps, ms, health, reached)
		p.record(ps, ms, health)
	}
	if p.plan.Halted && strategy.GetOnFailure() == v1alpha1.FleetFailureRollback && p.rollingOut && stableName != "" {
		plan := planRollback(members, order, targetName, stableName, strategy, previous, now, gates)
		plan.Rejects, plan.Failed = true, p.plan.Failed
		return plan
	}
	return p.plan
}

func partitionMembers(members []*Member) map[string][]*Member {
	byPartition := map[string][]*Member{}
	for _, m := range members {
		byPartition[m.Partition] = append(byPartition[m.Partition], m)
	}
	return byPartition
}

// planRollback takes a rejected revision off the members: in every partition at once, members
// on it go back to the stable revision, those not Ready at once (they cost no availability),
// Ready ones as maxUnavailable allows. Held members stay where they are; blocked ones stay
// until unblocked, then move back like the others. Members on the stable revision are kept
// there, new clusters get it, and members on an earlier target stay as they are. Maintenance
// windows, a partition's or a cluster's, do not hold a rollback. The plan is never complete: the stable revision stays, and
// the fleet waits for another digest or a reconcile request. Its counts are about the stable
// revision: updated counts the members on it.
func planRollback(members []*Member, order []string, rejected, stableName string, strategy v1alpha1.FleetRolloutStrategy,
	previous []v1alpha1.PartitionStatus, now time.Time, gates Gates) Plan {
	p := newPlanner(stableName, stableName, strategy, previous, now, gates)
	p.plan.Complete, p.plan.RollingBack = false, true
	byPartition := partitionMembers(members)
	for _, name := range order {
		ms := byPartition[name]
		ps, health := p.observe(name, ms, true)
		ps.Failed = 0
		for i, m := range ms {
			if m.Revision() == rejected && health[i].failed {
				ps.Failed++
				p.plan.Failed = append(p.plan.Failed, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: name, Reason: health[i].reason, Message: health[i].message})
			}
		}
		budget := newUnavailableBudget(strategy.MaxUnavailable, ms, health)
		left := 0
		for i, m := range ms {
			h := health[i]
			switch {
			case m.Pkg == nil && (h.held || h.blocked):
				p.plan.Assign[m.Namespace] = noMember
			case m.Pkg == nil || m.Revision() == stableName:
				p.plan.Assign[m.Namespace] = ToStable
			case h.held || h.blocked || m.Revision() != rejected:
				p.plan.Assign[m.Namespace] = keepAsIs
			case budget.allow(m, h):
				p.plan.Assign[m.Namespace] = ToStable
				left++
			default:
				p.plan.Assign[m.Namespace] = keepAsIs
				left++
			}
		}
		ps.State = v1alpha1.PartitionRolledBack
		if left > 0 {
			ps.State = v1alpha1.PartitionRollingBack
			if p.plan.Current == "" {
				p.plan.Current = name
			}
		}
		p.record(ps, ms, health)
	}
	p.plan.Complete = false
	return p.plan
}

// keepOrStable is where a member the rollout has not reached stays: on the stable revision,
// or as it is when it is on an earlier target, or nowhere when there is no stable revision yet.
func keepOrStable(m *Member, targetName, stableName string, rollingOut bool) assignment {
	switch {
	case !rollingOut || (m.Pkg != nil && m.Revision() == targetName):
		return ToTarget
	case stableName == "":
		if m.Pkg != nil {
			return keepAsIs
		}
		return noMember
	case m.Pkg == nil || m.Revision() == stableName:
		return ToStable
	default:
		return keepAsIs
	}
}

// soakOf is a partition's soak: spec.rollout.soak, and with spec.rollout.analysis at least
// one analysis interval, so that every check is evaluated before the next partition starts.
func soakOf(s v1alpha1.FleetRolloutStrategy, g *AnalysisGate) time.Duration {
	var soak time.Duration
	if s.Soak != nil {
		soak = s.Soak.Duration
	}
	if s.Analysis != nil {
		interval := time.Second
		if g != nil {
			interval = g.Interval
		}
		soak = max(soak, interval)
	}
	return soak
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
