package controller

import (
	"math"
	"strconv"
	"strings"
	"time"

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
