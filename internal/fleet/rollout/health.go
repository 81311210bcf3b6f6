package rollout

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// memberHealth is what a member's status says about the revision it is on. A held, blocked or
// window-held member is never failed; ready still says what its status says.
type memberHealth struct {
	ready, failed bool
	// held: the pkgsync.dev/hold annotation keeps it where it is.
	held bool
	// blocked: it cannot move for a reason of its own cluster or namespace (blockedBy).
	blocked bool
	// windowHeld: its HostedCluster's maintenance windows keep it off the target for now
	// (applyClusterWindows).
	windowHeld      bool
	reason, message string
	// pausedUntil is when the pause of a blocked member's HostedCluster ends by itself.
	pausedUntil time.Time
	// opensAt is when the next of a window-held member's cluster windows opens (zero when
	// none does, or its annotation cannot be read).
	opensAt time.Time
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
func healthOf(m *Member, deadline time.Duration, now time.Time) memberHealth {
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
func blockedBy(m *Member, now time.Time) (memberHealth, bool) {
	if hc := m.Cluster; hc != nil {
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
	if m.Pkg == nil {
		return memberHealth{}, false
	}
	if ready := conditions.Get(m.Pkg, meta.ReadyCondition); ready != nil && ready.Status == metav1.ConditionFalse && blockingReasons[ready.Reason] {
		return memberHealth{blocked: true, reason: ready.Reason, message: ready.Message}, true
	}
	return memberHealth{}, false
}

// statusHealth reads a member's status. A member is Ready when its controller has seen its
// current spec and says Ready; it has failed when it is Stalled, or when it has been on its
// revision for longer than the progress deadline without becoming Ready.
func statusHealth(m *Member, deadline time.Duration, now time.Time) memberHealth {
	if m.Pkg == nil {
		return memberHealth{reason: v1alpha1.MemberNotCreatedReason, message: "no member Package yet"}
	}
	p := m.Pkg
	ready := conditions.Get(p, meta.ReadyCondition)
	h := memberHealth{reason: v1alpha1.ProgressingReason, message: "waiting for the member's controller"}
	if ready != nil {
		h.reason, h.message = ready.Reason, ready.Message
	}
	current := p.Status.ObservedGeneration == p.Generation || (ready != nil && ready.ObservedGeneration == p.Generation)
	if PackageReady(p) {
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

// inFlight: the member is on its way (not Ready, not failed) and not set aside.
func (h memberHealth) inFlight() bool {
	return !h.ready && !h.failed && !h.aside()
}

// aside: the member is held, blocked or window-held: it stays where it is, uses no budget,
// counts no failure and holds no partition back (standAside).
func (h memberHealth) aside() bool {
	return h.held || h.blocked || h.windowHeld
}

// PackageReady reports whether a member Package is Ready on its current spec: its controller
// has seen its generation and says Ready. The rollout counts a member Ready so (statusHealth),
// and a fleet's spec.dependsOn reads the members of the fleets it names so.
func PackageReady(p *v1alpha1.Package) bool {
	ready := conditions.Get(p, meta.ReadyCondition)
	return ready != nil && ready.Status == metav1.ConditionTrue && p.Status.ObservedGeneration == p.Generation
}
