package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

func TestPartitionOrder(t *testing.T) {
	t.Parallel()
	present := []string{"b", "", "10", "2", "a", "canary", "b"}
	tests := []struct {
		name  string
		order *v1alpha1.PartitionOrder
		want  []string
	}{
		{"alphanumeric by default, unlabelled last", nil, []string{"2", "10", "a", "b", "canary", ""}},
		{"static with catch-all", &v1alpha1.PartitionOrder{Static: []string{"canary", "*", "2"}}, []string{"canary", "10", "a", "b", "2", ""}},
		{"static without catch-all: the rest after, alphanumerically", &v1alpha1.PartitionOrder{Static: []string{"b", "absent"}}, []string{"b", "2", "10", "a", "canary", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, PartitionOrder(present, &v1alpha1.FleetPartitions{LabelKey: "k", Order: tt.order}))
		})
	}
}

func TestScaledCount(t *testing.T) {
	t.Parallel()
	pct := intstr.FromString("10%")
	assert.Equal(t, 1, scaledCount(nil, 50, 1, false))
	assert.Equal(t, 5, scaledCount(&pct, 50, 1, false))
	assert.Equal(t, 1, scaledCount(&pct, 5, 1, false), "at least 1")
	assert.Equal(t, 2, scaledCount(&pct, 11, 1, true), "failure threshold rounds up")
	three := intstr.FromInt32(3)
	assert.Equal(t, 3, scaledCount(&three, 50, 1, false))
}

// planMember is a member on a revision, Ready or not.
func planMember(ns, partition, revision string, ready bool, now time.Time) *Member {
	p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: ns, Generation: 2, Annotations: map[string]string{
		v1alpha1.FleetRevisionAnnotation: revision, v1alpha1.FleetRevisionTimeAnnotation: now.Add(-time.Minute).Format(time.RFC3339),
	}}}
	status := metav1.ConditionFalse
	reason := v1alpha1.PhaseProgressingReason
	if ready {
		status, reason = metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason
		p.Status.ObservedGeneration = 2
	}
	p.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: status, Reason: reason, ObservedGeneration: 2}}
	return &Member{Namespace: ns, Partition: partition, Pkg: p}
}

func stalled(m *Member) *Member {
	m.Pkg.Status.Conditions = append(m.Pkg.Status.Conditions, metav1.Condition{Type: meta.StalledCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.RenderFailedReason, Message: "bad template", ObservedGeneration: 2})
	return m
}

func countAssigned(plan Plan, a assignment) int {
	n := 0
	for _, v := range plan.Assign {
		if v == a {
			n++
		}
	}
	return n
}

func TestPlanRollout(t *testing.T) {
	t.Parallel()
	now := time.Now()
	order := []string{"canary", "prod"}
	fleet := func(canaryReadyOnTarget int) []*Member {
		var ms []*Member
		for i := range 4 {
			rev := "old"
			if i < canaryReadyOnTarget {
				rev = "new"
			}
			ms = append(ms, planMember(fmt.Sprintf("c%d", i), "canary", rev, true, now))
		}
		for i := range 6 {
			ms = append(ms, planMember(fmt.Sprintf("p%d", i), "prod", "old", true, now))
		}
		return ms
	}

	t.Run("maxUnavailable bounds the members moved at once; later partitions stay", func(t *testing.T) {
		t.Parallel()
		two := intstr.FromInt32(2)
		plan := Decide(fleet(0), order, "new", "old", v1alpha1.FleetRolloutStrategy{MaxUnavailable: &two}, nil, now, Gates{})
		assert.Equal(t, 2, countAssigned(plan, ToTarget))
		assert.Equal(t, "canary", plan.Current)
		for i := range 6 {
			assert.Equal(t, ToStable, plan.Assign[fmt.Sprintf("p%d", i)])
		}
		assert.False(t, plan.Complete)
	})
	t.Run("an unavailable member on the target uses the budget", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[0] = planMember("c0", "canary", "new", false, now)
		plan := Decide(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{})
		assert.Equal(t, 1, countAssigned(plan, ToTarget), "only the member already moved")
	})
	t.Run("members not Ready move at once", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[1] = planMember("c1", "canary", "old", false, now)
		ms[2] = planMember("c2", "canary", "old", false, now)
		plan := Decide(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{})
		assert.Equal(t, ToTarget, plan.Assign["c1"])
		assert.Equal(t, ToTarget, plan.Assign["c2"])
		assert.Equal(t, ToStable, plan.Assign["c0"])
	})
	t.Run("a finished partition lets the next one start", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(4), order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{})
		assert.Equal(t, "prod", plan.Current)
		assert.Equal(t, 5, countAssigned(plan, ToTarget))
		assert.Equal(t, v1alpha1.PartitionComplete, plan.Partitions[0].State)
		assert.Equal(t, v1alpha1.PartitionProgressing, plan.Partitions[1].State)
	})
	t.Run("soak holds the next partition until it has passed", func(t *testing.T) {
		t.Parallel()
		strategy := v1alpha1.FleetRolloutStrategy{Soak: &metav1.Duration{Duration: time.Minute}}
		plan := Decide(fleet(4), order, "new", "old", strategy, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionSoaking, plan.Partitions[0].State)
		assert.Equal(t, v1alpha1.PartitionPending, plan.Partitions[1].State)
		assert.Equal(t, 4, countAssigned(plan, ToTarget))
		assert.InDelta(t, time.Minute+time.Second, plan.WakeAfter, float64(2*time.Second))

		started := metav1.NewTime(now.Add(-5 * time.Minute))
		soaking := []v1alpha1.PartitionStatus{{Name: "canary", State: v1alpha1.PartitionSoaking, LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Minute)), StartedAt: &started}}
		plan = Decide(fleet(4), order, "new", "old", strategy, soaking, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionComplete, plan.Partitions[0].State)
		assert.Equal(t, "prod", plan.Current)
		assert.Equal(t, &started, plan.Partitions[0].StartedAt, "a partition's start is kept through its states")
		assert.NotNil(t, plan.Partitions[1].StartedAt, "the next partition starts now")
	})
	t.Run("failures up to the threshold halt the rollout", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[0] = stalled(planMember("c0", "canary", "new", false, now))
		plan := Decide(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{})
		assert.True(t, plan.Halted)
		assert.Equal(t, v1alpha1.PartitionHalted, plan.Partitions[0].State)
		assert.Equal(t, 1, countAssigned(plan, ToTarget), "nothing else moves")
		assert.Len(t, plan.Failed, 1)

		two := intstr.FromInt32(2)
		plan = Decide(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{FailureThreshold: &two}, nil, now, Gates{})
		assert.False(t, plan.Halted, "one failure is under a threshold of 2")
	})
	t.Run("a member past the progress deadline has failed", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[0] = planMember("c0", "canary", "new", false, now)
		plan := Decide(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{ProgressDeadline: &metav1.Duration{Duration: 30 * time.Second}}, nil, now, Gates{})
		assert.True(t, plan.Halted)
		plan = Decide(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}, nil, now, Gates{})
		assert.False(t, plan.Halted)
		assert.InDelta(t, 4*time.Minute, plan.WakeAfter, float64(2*time.Second), "woken when the deadline passes")
	})
	t.Run("paused moves nothing", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(0), order, "new", "old", v1alpha1.FleetRolloutStrategy{Paused: true}, nil, now, Gates{})
		assert.Equal(t, 0, countAssigned(plan, ToTarget))
	})
	t.Run("a failed preflight moves nothing and creates no member without a stable revision", func(t *testing.T) {
		t.Parallel()
		plan := Decide(fleet(0), order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{PreflightFailed: true})
		assert.Equal(t, 0, countAssigned(plan, ToTarget))
		assert.False(t, plan.Halted, "not a failure of a member on the target")
		ms := []*Member{{Namespace: "c0", Partition: "canary"}}
		plan = Decide(ms, order, "new", "", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{PreflightFailed: true})
		assert.Equal(t, noMember, plan.Assign["c0"])
	})
	t.Run("first rollout: no member beyond the current partition", func(t *testing.T) {
		t.Parallel()
		ms := []*Member{{Namespace: "c0", Partition: "canary"}, {Namespace: "p0", Partition: "prod"}}
		plan := Decide(ms, order, "new", "", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{})
		assert.Equal(t, ToTarget, plan.Assign["c0"])
		assert.Equal(t, noMember, plan.Assign["p0"])
	})
	t.Run("nothing to roll out: every member on the one revision", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms = append(ms, &Member{Namespace: "new-cluster", Partition: "prod"})
		plan := Decide(ms, order, "old", "old", v1alpha1.FleetRolloutStrategy{}, nil, now, Gates{})
		assert.Equal(t, len(ms), countAssigned(plan, ToTarget))
		assert.False(t, plan.Complete, "the new cluster's member is not Ready yet")
	})
}

// onCluster gives a member a HostedCluster, Available unless changed.
func onCluster(m *Member, change func(*hosted.HostedCluster)) *Member {
	m.Cluster = &hosted.HostedCluster{Namespace: "clusters", Name: m.Namespace, Available: true}
	if change != nil {
		change(m.Cluster)
	}
	return m
}

// notReadyWith makes a member's Ready condition False with reason.
func notReadyWith(m *Member, reason string) *Member {
	m.Pkg.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: "it says why", ObservedGeneration: 2}}
	m.Pkg.Status.ObservedGeneration = 2
	return m
}

func TestPlanBlockedAndHeld(t *testing.T) {
	t.Parallel()
	now := time.Now()
	order := []string{"canary", "prod"}
	// fleet is 4 canaries and 4 prod members, Ready; the first canaryOnTarget canaries on "new".
	fleet := func(canaryOnTarget int) []*Member {
		var ms []*Member
		for i := range 4 {
			rev := "old"
			if i < canaryOnTarget {
				rev = "new"
			}
			ms = append(ms, onCluster(planMember(fmt.Sprintf("c%d", i), "canary", rev, true, now), nil))
		}
		for i := range 4 {
			ms = append(ms, onCluster(planMember(fmt.Sprintf("p%d", i), "prod", "old", true, now), nil))
		}
		return ms
	}
	strict := v1alpha1.FleetRolloutStrategy{ProgressDeadline: &metav1.Duration{Duration: 30 * time.Second}}
	notAvailable := func(hc *hosted.HostedCluster) { hc.Available, hc.Message = false, "etcd is down" }

	t.Run("a member whose HostedCluster is not Available uses no budget and stays where it is", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		onCluster(notReadyWith(onRevision(ms[0], "old"), v1alpha1.HostedClusterUnavailableReason), notAvailable)
		plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.Equal(t, ToStable, plan.Assign["c0"], "not moved while blocked")
		assert.Equal(t, 1, countAssigned(plan, ToTarget), "the budget of 1 is not used up by the blocked member")
		assert.Equal(t, int32(1), plan.Partitions[0].Blocked)
		if assert.Len(t, plan.Blocked, 1) {
			assert.Equal(t, v1alpha1.HostedClusterUnavailableReason, plan.Blocked[0].Reason)
			assert.Contains(t, plan.Blocked[0].Message, "etcd is down")
		}
	})
	t.Run("a blocked member on the target past the progress deadline is not a failure", func(t *testing.T) {
		t.Parallel()
		for _, reason := range []string{v1alpha1.HostedClusterUnavailableReason, v1alpha1.AuthenticationFailedReason, v1alpha1.VerificationFailedReason,
			v1alpha1.InsecureKubeconfigReason, v1alpha1.NotHostedControlPlaneReason, v1alpha1.ForbiddenReason, v1alpha1.DependencyNotReadyReason} {
			ms := fleet(0)
			notReadyWith(onRevision(ms[0], "new"), reason)
			plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
			assert.False(t, plan.Halted, reason)
			assert.Zero(t, plan.Partitions[0].Failed, reason)
			assert.Len(t, plan.Blocked, 1, reason)
			assert.Empty(t, plan.InProgress, reason)
		}
	})
	t.Run("a failure of the revision on a healthy cluster still halts", func(t *testing.T) {
		t.Parallel()
		for _, reason := range []string{v1alpha1.ApplyFailedReason, v1alpha1.PhaseProgressingReason} {
			ms := fleet(0)
			notReadyWith(onRevision(ms[0], "new"), reason)
			plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
			assert.True(t, plan.Halted, "%s past the progress deadline", reason)
			assert.Empty(t, plan.Blocked, reason)
		}
		ms := fleet(0)
		ms[0] = onCluster(stalled(planMember("c0", "canary", "new", false, now)), nil)
		assert.True(t, Decide(ms, order, "new", "old", strict, nil, now, Gates{}).Halted, "Stalled (RenderFailed)")
		// A dependency cycle is the package's own error (spec.dependsOn of the template): a failure.
		ms = fleet(0)
		ms[0] = onCluster(notReadyWith(onRevision(planMember("c0", "canary", "new", false, now), "new"), v1alpha1.DependencyCycleReason), nil)
		ms[0].Pkg.Status.Conditions = append(ms[0].Pkg.Status.Conditions, metav1.Condition{Type: meta.StalledCondition, Status: metav1.ConditionTrue,
			Reason: v1alpha1.DependencyCycleReason, Message: "dependency cycle: a -> b -> a", ObservedGeneration: 2})
		plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.True(t, plan.Halted, "Stalled (DependencyCycle)")
		assert.Empty(t, plan.Blocked, "DependencyCycle")
		// An applied object that failed (a Deployment past its progress deadline): the member
		// says so itself, and fails at once, not at the fleet's progress deadline (issue 42).
		ms = fleet(0)
		ms[0] = onCluster(notReadyWith(onRevision(planMember("c0", "canary", "new", false, now), "new"), v1alpha1.ObjectsFailedReason), nil)
		ms[0].Pkg.Status.Conditions = append(ms[0].Pkg.Status.Conditions, metav1.Condition{Type: meta.StalledCondition, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ObjectsFailedReason, Message: "phase deploy on management cluster failed", ObservedGeneration: 2})
		plan = Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.True(t, plan.Halted, "Stalled (ObjectsFailed) before the progress deadline")
	})
	t.Run("a paused HostedCluster blocks its member, until its pause ends", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		onCluster(ms[0], func(hc *hosted.HostedCluster) { hc.Paused = true })
		until := now.Add(time.Hour).UTC().Truncate(time.Second)
		onCluster(ms[1], func(hc *hosted.HostedCluster) { hc.PausedUntil = until.Format(time.RFC3339) })
		plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.Equal(t, int32(2), plan.Partitions[0].Blocked)
		for _, b := range plan.Blocked {
			assert.Equal(t, v1alpha1.HostedClusterPausedReason, b.Reason)
		}
		assert.Equal(t, ToStable, plan.Assign["c0"])
		assert.Equal(t, ToStable, plan.Assign["c1"])
		assert.InDelta(t, time.Hour, plan.WakeAfter, float64(2*time.Second), "woken when spec.pausedUntil passes")

		plan = Decide(ms, order, "new", "old", strict, nil, now.Add(2*time.Hour), Gates{})
		assert.Equal(t, int32(1), plan.Partitions[0].Blocked, "a pausedUntil in the past pauses nothing")
	})
	t.Run("blocked members hold neither their partition nor its soak", func(t *testing.T) {
		t.Parallel()
		ms := fleet(3)
		onCluster(ms[3], notAvailable)
		plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionComplete, plan.Partitions[0].State)
		assert.Equal(t, "prod", plan.Current)
		assert.Equal(t, ToStable, plan.Assign["c3"])

		soak := strict
		soak.Soak = &metav1.Duration{Duration: time.Minute}
		plan = Decide(ms, order, "new", "old", soak, nil, now, Gates{})
		assert.Equal(t, v1alpha1.PartitionSoaking, plan.Partitions[0].State, "the soak runs without the blocked member")
	})
	t.Run("a partition whose members are all blocked proves nothing: it waits", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		for _, m := range ms[:4] {
			onCluster(m, notAvailable)
		}
		plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.Equal(t, "canary", plan.Current)
		assert.Equal(t, v1alpha1.PartitionProgressing, plan.Partitions[0].State)
		assert.Equal(t, 0, countAssigned(plan, ToTarget))

		// Once a member of an earlier partition proved the revision, a later partition of
		// blocked members is passed.
		ms = fleet(4)
		for _, m := range ms[4:] {
			onCluster(m, notAvailable)
		}
		plan = Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.True(t, plan.Complete)
	})
	t.Run("an unblocked member catches up through the same checks", func(t *testing.T) {
		t.Parallel()
		// Its partition was done; the rollout went on to prod. Unblocked, the member is moved
		// within its partition's budget, and a failure of it counts.
		ms := fleet(3)
		prev := []v1alpha1.PartitionStatus{{Name: "canary", State: v1alpha1.PartitionComplete}, {Name: "prod", State: v1alpha1.PartitionProgressing}}
		plan := Decide(ms, order, "new", "old", strict, prev, now, Gates{})
		assert.Equal(t, "canary", plan.Current)
		assert.Equal(t, ToTarget, plan.Assign["c3"])
		assert.Equal(t, 4, countAssigned(plan, ToTarget), "nothing else moves meanwhile")

		ms[3] = onCluster(stalled(planMember("c3", "canary", "new", false, now)), nil)
		assert.True(t, Decide(ms, order, "new", "old", strict, prev, now, Gates{}).Halted)

		// With the rollout finished (target = stable), it moves at once, as a joining cluster.
		ms = fleet(0)
		for _, m := range ms {
			m.Pkg.Annotations[v1alpha1.FleetRevisionAnnotation] = "new"
		}
		ms[0].Pkg.Annotations[v1alpha1.FleetRevisionAnnotation] = "older"
		plan = Decide(ms, order, "new", "new", strict, nil, now, Gates{})
		assert.Equal(t, ToTarget, plan.Assign["c0"])
		onCluster(ms[0], notAvailable)
		plan = Decide(ms, order, "new", "new", strict, nil, now, Gates{})
		assert.Equal(t, keepAsIs, plan.Assign["c0"], "not while it is blocked")
		assert.True(t, plan.Complete)
	})
	t.Run("a blocked cluster without a member gets none", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms = append(ms, onCluster(&Member{Namespace: "c9", Partition: "canary"}, notAvailable))
		plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.Equal(t, noMember, plan.Assign["c9"])
	})
	t.Run("a hold keeps a member where it is", func(t *testing.T) {
		t.Parallel()
		for _, on := range []string{"HostedCluster", "member Package"} {
			ms := fleet(0)
			// Not Ready: without the hold it would move at once, for free.
			notReadyWith(onRevision(ms[0], "older"), v1alpha1.ApplyFailedReason)
			held := map[string]string{v1alpha1.HoldAnnotation: "change freeze"}
			if on == "HostedCluster" {
				ms[0].Cluster.Annotations = held
			} else {
				ms[0].Pkg.Annotations[v1alpha1.HoldAnnotation] = "change freeze"
			}
			plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
			assert.Equal(t, keepAsIs, plan.Assign["c0"], on)
			assert.Equal(t, 1, countAssigned(plan, ToTarget), "%s: the held member uses no budget", on)
			if assert.Len(t, plan.Held, 1, on) {
				assert.Equal(t, v1alpha1.MemberHeldReason, plan.Held[0].Reason)
				assert.Equal(t, v1alpha1.HoldAnnotation+" on the "+on+": change freeze", plan.Held[0].Message)
			}
			assert.Equal(t, int32(1), plan.Partitions[0].Held)
		}
	})
	t.Run("a held member holds no partition back and counts no failure", func(t *testing.T) {
		t.Parallel()
		ms := fleet(3)
		ms[3] = onCluster(stalled(planMember("c3", "canary", "new", false, now)), func(hc *hosted.HostedCluster) {
			hc.Annotations = map[string]string{v1alpha1.HoldAnnotation: ""}
		})
		plan := Decide(ms, order, "new", "old", strict, nil, now, Gates{})
		assert.False(t, plan.Halted)
		assert.Equal(t, "prod", plan.Current)
		assert.Equal(t, keepAsIs, plan.Assign["c3"])
		assert.Contains(t, plan.Held[0].Message, "no reason given")

		// Nor is a held cluster given a member, or a held member corrected, when nothing rolls out.
		ms = append(ms, onCluster(&Member{Namespace: "c9", Partition: "canary"}, func(hc *hosted.HostedCluster) {
			hc.Annotations = map[string]string{v1alpha1.HoldAnnotation: "not yet"}
		}))
		plan = Decide(ms, order, "new", "new", strict, nil, now, Gates{})
		assert.Equal(t, noMember, plan.Assign["c9"])
		assert.Equal(t, keepAsIs, plan.Assign["c3"])
	})
}

// onRevision puts a member on revision, moved there a minute ago.
func onRevision(m *Member, revision string) *Member {
	m.Pkg.Annotations[v1alpha1.FleetRevisionAnnotation] = revision
	return m
}

// TestPlanCatchUpWithinBudget: once a rollout is complete (target and stable the same), the
// members that stood aside (released holds, clusters whose windows open together) catch up
// within maxUnavailable, not all in one pass; a new cluster still gets its first install.
func TestPlanCatchUpWithinBudget(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var ms []*Member
	for i := range 5 {
		ms = append(ms, onCluster(planMember(fmt.Sprintf("p%d", i), "prod", "old", true, now), nil))
	}
	for i := range 5 {
		ms = append(ms, onCluster(planMember(fmt.Sprintf("q%d", i), "prod", "new", true, now), nil))
	}
	joining := onCluster(&Member{Namespace: "new-cluster", Partition: "prod"}, nil)
	ms = append(ms, joining)
	two := intstr.FromInt32(2)
	plan := Decide(ms, []string{"prod"}, "new", "new", v1alpha1.FleetRolloutStrategy{MaxUnavailable: &two}, nil, now, Gates{})
	moved := 0
	for i := range 5 {
		if plan.Assign[fmt.Sprintf("p%d", i)] == ToTarget {
			moved++
		}
	}
	assert.Equal(t, 2, moved, "maxUnavailable 2: two members catch up in this pass")
	assert.Contains(t, []assignment{ToTarget, ToStable}, plan.Assign["new-cluster"], "a first install (of the one revision) is not held back")

	// The members already moving (not Ready on the target) use the budget up: nothing more moves.
	for _, m := range ms[:2] {
		onRevision(m, "new").Pkg.Status.Conditions[0].Status = metav1.ConditionFalse
	}
	plan = Decide(ms[:10], []string{"prod"}, "new", "new", v1alpha1.FleetRolloutStrategy{MaxUnavailable: &two}, nil, now, Gates{})
	for i := 2; i < 5; i++ {
		assert.Equal(t, keepAsIs, plan.Assign[fmt.Sprintf("p%d", i)], "p%d waits for the budget", i)
	}
}
