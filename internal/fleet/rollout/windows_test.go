package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func windowsOf(t *testing.T, ws ...v1alpha1.FleetWindow) []Window {
	t.Helper()
	parsed, err := ParseWindows(ws)
	require.NoError(t, err)
	return parsed
}

func TestWindowAt(t *testing.T) {
	t.Parallel()
	// Wednesday 25 November 2026, 10:30 UTC.
	now := time.Date(2026, 11, 25, 10, 30, 0, 0, time.UTC)
	hour := metav1.Duration{Duration: time.Hour}
	tests := []struct {
		name      string
		windows   []v1alpha1.FleetWindow
		partition string
		want      windowState
		applies   bool
	}{
		{"no window: moves at any time", nil, "prod", windowState{}, false},
		{"open: opened at 10:00 for an hour", []v1alpha1.FleetWindow{{Schedule: "0 10 * * *", Duration: hour}}, "prod",
			windowState{open: true, edge: now.Add(30 * time.Minute)}, true},
		{"closed: opened at 9:00 for an hour, opens again tomorrow", []v1alpha1.FleetWindow{{Schedule: "0 9 * * *", Duration: hour}}, "prod",
			windowState{edge: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}, true},
		{"the end of a window is outside it", []v1alpha1.FleetWindow{{Schedule: "30 9 * * *", Duration: hour}}, "prod",
			windowState{edge: time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)}, true},
		{"read in its time zone: 11:00 in Berlin is 10:00 UTC", []v1alpha1.FleetWindow{{Schedule: "0 11 * * 3", Duration: hour, TimeZone: "Europe/Berlin"}}, "prod",
			windowState{open: true, edge: now.Add(30 * time.Minute)}, true},
		{"a window for other partitions does not apply", []v1alpha1.FleetWindow{{Schedule: "0 9 * * *", Duration: hour, Partitions: []string{"canary"}}}, "prod",
			windowState{}, false},
		{"any open window opens the partition; the latest end closes it", []v1alpha1.FleetWindow{
			{Schedule: "0 9 * * *", Duration: hour},
			{Schedule: "0 10 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Partitions: []string{"prod"}},
			{Schedule: "15 10 * * *", Duration: hour},
		}, "prod", windowState{open: true, edge: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}, true},
		{"closed: the next of several opens first", []v1alpha1.FleetWindow{
			{Schedule: "0 22 * * *", Duration: hour}, {Schedule: "@weekly", Duration: hour}, {Schedule: "45 10 * * *", Duration: hour, Partitions: []string{"canary"}},
		}, "canary", windowState{edge: now.Add(15 * time.Minute)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := windowAt(windowsOf(t, tt.windows...), tt.partition, now)
			assert.Equal(t, tt.applies, ok)
			assert.Equal(t, tt.want.open, got.open)
			assert.True(t, tt.want.edge.Equal(got.edge), "edge %s, want %s", got.edge, tt.want.edge)
		})
	}
}

func TestParseWindows(t *testing.T) {
	t.Parallel()
	for _, w := range []v1alpha1.FleetWindow{
		{Schedule: "0 9 * *", Duration: metav1.Duration{Duration: time.Hour}},
		{Schedule: "0 0 9 * * *", Duration: metav1.Duration{Duration: time.Hour}},
		{Schedule: "CRON_TZ=Asia/Tokyo 0 9 * * *", Duration: metav1.Duration{Duration: time.Hour}},
		{Schedule: "0 9 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus"},
		{Schedule: "0 9 * * *"},
	} {
		_, err := ParseWindows([]v1alpha1.FleetWindow{w})
		assert.Error(t, err, "%+v", w)
	}
}

// TestPlanWindows covers how spec.rollout.windows gate the plan.
func TestPlanWindows(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 10, 30, 0, 0, time.UTC)
	order := []string{"canary", "prod"}
	hour := metav1.Duration{Duration: time.Hour}
	open := v1alpha1.FleetWindow{Schedule: "0 10 * * *", Duration: hour}
	closed := v1alpha1.FleetWindow{Schedule: "0 22 * * *", Duration: hour}
	two := intstr.FromInt32(2)
	strategy := v1alpha1.FleetRolloutStrategy{MaxUnavailable: &two, ProgressDeadline: &metav1.Duration{Duration: 24 * time.Hour}}
	// members: canaries c0 (on "new", not Ready yet), c1 c2 c3 Ready on "old"; prod p0 p1 on "old".
	members := func() []*Member {
		ms := []*Member{planMember("c0", "canary", "new", false, now)}
		for i := 1; i < 4; i++ {
			ms = append(ms, planMember(fmt.Sprintf("c%d", i), "canary", "old", true, now))
		}
		return append(ms, planMember("p0", "prod", "old", true, now), planMember("p1", "prod", "old", true, now))
	}
	tests := []struct {
		name    string
		members func() []*Member
		windows []v1alpha1.FleetWindow
		check   func(t *testing.T, plan Plan)
	}{{
		name: "an open window moves members as the budget allows", members: members, windows: []v1alpha1.FleetWindow{open},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, 2, countAssigned(plan, ToTarget))
			assert.True(t, plan.Partitions[0].Window.Open)
			assert.InDelta(t, 30*time.Minute, plan.WakeAfter, float64(2*time.Second), "woken when the window closes")
		},
	}, {
		name: "a closed window moves no new member; the one in flight finishes", members: members, windows: []v1alpha1.FleetWindow{closed},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToTarget, plan.Assign["c0"], "in flight: kept on the target")
			assert.Equal(t, 1, countAssigned(plan, ToTarget))
			assert.False(t, plan.Partitions[0].Window.Open)
			assert.Equal(t, time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC), plan.Partitions[0].Window.OpensAt.UTC())
			assert.InDelta(t, 11*time.Hour+30*time.Minute, plan.WakeAfter, float64(2*time.Second), "woken when the window opens")
		},
	}, {
		name: "a closed window does not hold a member not Ready on the old revision either",
		members: func() []*Member {
			ms := members()
			ms[1] = planMember("c1", "canary", "old", false, now)
			return ms
		},
		windows: []v1alpha1.FleetWindow{closed},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToStable, plan.Assign["c1"], "not moved: moving it would be a move")
		},
	}, {
		name: "a new cluster's first install is not held by a closed window",
		members: func() []*Member {
			ms := members()
			ms[0] = planMember("c0", "canary", "new", true, now)
			return append(ms, &Member{Namespace: "c9", Partition: "canary"})
		},
		windows: []v1alpha1.FleetWindow{closed},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToTarget, plan.Assign["c9"])
			assert.Equal(t, ToStable, plan.Assign["c1"])
		},
	}, {
		name: "a window for other partitions does not hold this one", members: members,
		windows: []v1alpha1.FleetWindow{{Schedule: closed.Schedule, Duration: hour, Partitions: []string{"prod"}}},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, 2, countAssigned(plan, ToTarget))
			assert.Nil(t, plan.Partitions[0].Window)
			assert.NotNil(t, plan.Partitions[1].Window)
		},
	}, {
		name: "drift correction is not held: a member on the stable revision of a later partition is kept there", members: members,
		windows: []v1alpha1.FleetWindow{closed},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, ToStable, plan.Assign["p0"])
		},
	}, {
		name: "with nothing to roll out, a closed window keeps a member on another revision where it is",
		members: func() []*Member {
			return []*Member{planMember("c0", "canary", "new", true, now), planMember("c1", "canary", "old", true, now)}
		},
		windows: []v1alpha1.FleetWindow{closed},
		check: func(t *testing.T, plan Plan) {
			assert.Equal(t, keepAsIs, plan.Assign["c1"])
			assert.Equal(t, ToTarget, plan.Assign["c0"])
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stable := "old"
			if tt.name == "with nothing to roll out, a closed window keeps a member on another revision where it is" {
				stable = "new"
			}
			plan := Decide(tt.members(), order, "new", stable, strategy, nil, now, Gates{Windows: windowsOf(t, tt.windows...)})
			tt.check(t, plan)
		})
	}
}
