package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
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
			assert.Equal(t, tt.want, partitionOrder(present, &v1alpha1.FleetPartitions{LabelKey: "k", Order: tt.order}))
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
func planMember(ns, partition, revision string, ready bool, now time.Time) *fleetMember {
	p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: ns, Generation: 2, Annotations: map[string]string{
		v1alpha1.FleetRevisionAnnotation: revision, fleetRevisionTimeAnnotation: now.Add(-time.Minute).Format(time.RFC3339),
	}}}
	status := metav1.ConditionFalse
	reason := v1alpha1.PhaseProgressingReason
	if ready {
		status, reason = metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason
		p.Status.ObservedGeneration = 2
	}
	p.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: status, Reason: reason, ObservedGeneration: 2}}
	return &fleetMember{namespace: ns, partition: partition, pkg: p}
}

func stalled(m *fleetMember) *fleetMember {
	m.pkg.Status.Conditions = append(m.pkg.Status.Conditions, metav1.Condition{Type: meta.StalledCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.RenderFailedReason, Message: "bad template", ObservedGeneration: 2})
	return m
}

func countAssigned(plan rolloutPlan, a assignment) int {
	n := 0
	for _, v := range plan.assign {
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
	fleet := func(canaryReadyOnTarget int) []*fleetMember {
		var ms []*fleetMember
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
		plan := planRollout(fleet(0), order, "new", "old", v1alpha1.FleetRolloutStrategy{MaxUnavailable: &two}, nil, now)
		assert.Equal(t, 2, countAssigned(plan, toTarget))
		assert.Equal(t, "canary", plan.current)
		for i := range 6 {
			assert.Equal(t, toStable, plan.assign[fmt.Sprintf("p%d", i)])
		}
		assert.False(t, plan.complete)
	})
	t.Run("an unavailable member on the target uses the budget", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[0] = planMember("c0", "canary", "new", false, now)
		plan := planRollout(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now)
		assert.Equal(t, 1, countAssigned(plan, toTarget), "only the member already moved")
	})
	t.Run("members not Ready move at once", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[1] = planMember("c1", "canary", "old", false, now)
		ms[2] = planMember("c2", "canary", "old", false, now)
		plan := planRollout(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now)
		assert.Equal(t, toTarget, plan.assign["c1"])
		assert.Equal(t, toTarget, plan.assign["c2"])
		assert.Equal(t, toStable, plan.assign["c0"])
	})
	t.Run("a finished partition lets the next one start", func(t *testing.T) {
		t.Parallel()
		plan := planRollout(fleet(4), order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now)
		assert.Equal(t, "prod", plan.current)
		assert.Equal(t, 5, countAssigned(plan, toTarget))
		assert.Equal(t, v1alpha1.PartitionComplete, plan.partitions[0].State)
		assert.Equal(t, v1alpha1.PartitionProgressing, plan.partitions[1].State)
	})
	t.Run("soak holds the next partition until it has passed", func(t *testing.T) {
		t.Parallel()
		strategy := v1alpha1.FleetRolloutStrategy{Soak: &metav1.Duration{Duration: time.Minute}}
		plan := planRollout(fleet(4), order, "new", "old", strategy, nil, now)
		assert.Equal(t, v1alpha1.PartitionSoaking, plan.partitions[0].State)
		assert.Equal(t, v1alpha1.PartitionPending, plan.partitions[1].State)
		assert.Equal(t, 4, countAssigned(plan, toTarget))
		assert.InDelta(t, time.Minute+time.Second, plan.wakeAfter, float64(2*time.Second))

		started := metav1.NewTime(now.Add(-5 * time.Minute))
		soaking := []v1alpha1.PartitionStatus{{Name: "canary", State: v1alpha1.PartitionSoaking, LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Minute)), StartedAt: &started}}
		plan = planRollout(fleet(4), order, "new", "old", strategy, soaking, now)
		assert.Equal(t, v1alpha1.PartitionComplete, plan.partitions[0].State)
		assert.Equal(t, "prod", plan.current)
		assert.Equal(t, &started, plan.partitions[0].StartedAt, "a partition's start is kept through its states")
		assert.NotNil(t, plan.partitions[1].StartedAt, "the next partition starts now")
	})
	t.Run("failures up to the threshold halt the rollout", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[0] = stalled(planMember("c0", "canary", "new", false, now))
		plan := planRollout(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{}, nil, now)
		assert.True(t, plan.halted)
		assert.Equal(t, v1alpha1.PartitionHalted, plan.partitions[0].State)
		assert.Equal(t, 1, countAssigned(plan, toTarget), "nothing else moves")
		assert.Len(t, plan.failed, 1)

		two := intstr.FromInt32(2)
		plan = planRollout(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{FailureThreshold: &two}, nil, now)
		assert.False(t, plan.halted, "one failure is under a threshold of 2")
	})
	t.Run("a member past the progress deadline has failed", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms[0] = planMember("c0", "canary", "new", false, now)
		plan := planRollout(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{ProgressDeadline: &metav1.Duration{Duration: 30 * time.Second}}, nil, now)
		assert.True(t, plan.halted)
		plan = planRollout(ms, order, "new", "old", v1alpha1.FleetRolloutStrategy{ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}, nil, now)
		assert.False(t, plan.halted)
		assert.InDelta(t, 4*time.Minute, plan.wakeAfter, float64(2*time.Second), "woken when the deadline passes")
	})
	t.Run("paused moves nothing", func(t *testing.T) {
		t.Parallel()
		plan := planRollout(fleet(0), order, "new", "old", v1alpha1.FleetRolloutStrategy{Paused: true}, nil, now)
		assert.Equal(t, 0, countAssigned(plan, toTarget))
	})
	t.Run("first rollout: no member beyond the current partition", func(t *testing.T) {
		t.Parallel()
		ms := []*fleetMember{{namespace: "c0", partition: "canary"}, {namespace: "p0", partition: "prod"}}
		plan := planRollout(ms, order, "new", "", v1alpha1.FleetRolloutStrategy{}, nil, now)
		assert.Equal(t, toTarget, plan.assign["c0"])
		assert.Equal(t, noMember, plan.assign["p0"])
	})
	t.Run("nothing to roll out: every member on the one revision", func(t *testing.T) {
		t.Parallel()
		ms := fleet(0)
		ms = append(ms, &fleetMember{namespace: "new-cluster", partition: "prod"})
		plan := planRollout(ms, order, "old", "old", v1alpha1.FleetRolloutStrategy{}, nil, now)
		assert.Equal(t, len(ms), countAssigned(plan, toTarget))
		assert.False(t, plan.complete, "the new cluster's member is not Ready yet")
	})
}

func TestMergedConfig(t *testing.T) {
	t.Parallel()
	got, err := mergedConfig(jsonOf(`{"a":{"x":1,"y":2},"b":"keep"}`), []v1alpha1.ConfigOverride{
		{HostedClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}, Config: jsonOf(`{"a":{"y":3}}`)},
		{HostedClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "silver"}}, Config: jsonOf(`{"b":"no"}`)},
	}, map[string]string{"tier": "gold"})
	assert.NoError(t, err)
	assert.JSONEq(t, `{"a":{"x":1,"y":3},"b":"keep"}`, string(got.Raw))
}

func jsonOf(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
