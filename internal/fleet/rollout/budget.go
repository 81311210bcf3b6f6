package rollout

import "k8s.io/apimachinery/pkg/util/intstr"

// unavailableBudget is spec.rollout.maxUnavailable spent over one partition's members as the
// planner walks them in order, by a rollout (moveWithinBudget) and a rollback (planRollback)
// alike, so that both count availability the same way. A member that exists and is not Ready
// is unavailable already: it takes its share of the budget from the start, and moving it costs
// nothing more. Moving a Ready member costs one, and so does creating a member, which is
// unavailable until it is Ready. Held, blocked and window-held members stand aside: they are never counted,
// and never asked about.
type unavailableBudget struct {
	left int
}

// newUnavailableBudget is maxUnavailable of the partition's members (ms, read as health says),
// less those already unavailable.
func newUnavailableBudget(maxUnavailable *intstr.IntOrString, ms []*Member, health []memberHealth) unavailableBudget {
	unavailable := 0
	for i, m := range ms {
		if m.Pkg != nil && !health[i].ready && !health[i].aside() {
			unavailable++
		}
	}
	return unavailableBudget{left: scaledCount(maxUnavailable, len(ms), 1, false) - unavailable}
}

// allow reports whether m may be moved (or created) now and, like rate.Limiter's Allow, takes
// what that costs when it may: nothing for a member that is unavailable already, one otherwise.
func (b *unavailableBudget) allow(m *Member, h memberHealth) bool {
	if m.Pkg != nil && !h.ready {
		return true
	}
	if b.left > 0 {
		b.left--
		return true
	}
	return false
}
