package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

func TestParseClusterWindows(t *testing.T) {
	t.Parallel()
	// Wednesday 25 November 2026, 10:30 UTC.
	now := time.Date(2026, 11, 25, 10, 30, 0, 0, time.UTC)
	t.Run("read as spec.rollout.windows are", func(t *testing.T) {
		t.Parallel()
		ws, err := ParseClusterWindows(` [{"schedule":"0 11 * * 3","duration":"1h","timeZone":"Europe/Berlin"},
			{"schedule": "@weekly", "duration": "1h30m"}] `)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		st, applies := windowAt(ws, "any partition", now)
		assert.True(t, applies, "a cluster's windows apply whatever the partition")
		assert.True(t, st.open, "11:00 in Berlin is 10:00 UTC")
		assert.True(t, now.Add(30*time.Minute).Equal(st.edge), "closes at 11:00 UTC, not %s", st.edge)
	})
	bad := []struct {
		name, value, says string
	}{
		{"empty", "", "is not a JSON list"},
		{"one window, not in a list", `{"schedule":"0 22 * * 6","duration":"4h"}`, "is not a JSON list: write its windows in [...], even a single one"},
		{"not JSON", `[schedule: 0 22 * * 6]`, "is not a JSON list of windows: invalid character"},
		{"cut short", `[{"schedule":"0 22 * * 6","duration":"4h"}`, "is not a JSON list of windows"},
		{"more after the list", `[{"schedule":"0 22 * * 6","duration":"4h"}] []`, "has more after its list"},
		{"no window", `[]`, "lists no window: remove it to let the cluster's members move at any time, or hold them with pkgsync.dev/hold"},
		{"too many windows", "[" + strings.Repeat(`{"schedule":"@daily","duration":"1h"},`, 16) + `{"schedule":"@daily","duration":"1h"}]`, "lists 17 windows, at most 16"},
		{"too long", `[{"schedule":"@daily","duration":"1h"}]` + strings.Repeat(" ", 4096), "is 4135 bytes long, at most 4096"},
		{"partitions", `[{"schedule":"0 22 * * 6","duration":"4h","partitions":["prod"]}]`, "pkgsync.dev/maintenance-windows[0].partitions: a HostedCluster's window applies to all of its members"},
		{"an empty partitions is refused too", `[{"schedule":"0 22 * * 6","duration":"4h","partitions":[]}]`, "[0].partitions"},
		{"a misspelt field", `[{"schedule":"0 22 * * 6","duration":"4h","time_zone":"Europe/Berlin"}]`, `unknown field "time_zone"`},
		{"no schedule", `[{"duration":"4h"}]`, "[0].schedule is required"},
		{"a bad cron", `[{"schedule":"@daily","duration":"1h"},{"schedule":"0 25 * * *","duration":"4h"}]`, `pkgsync.dev/maintenance-windows[1].schedule "0 25 * * *": `},
		{"six fields", `[{"schedule":"0 0 22 * * 6","duration":"4h"}]`, "[0].schedule"},
		{"a time zone in the schedule", `[{"schedule":"CRON_TZ=Asia/Tokyo 0 9 * * *","duration":"4h"}]`, "name the time zone in timeZone"},
		{"a schedule too long", `[{"schedule":"` + strings.Repeat("1,", 200) + `1 * * * *","duration":"4h"}]`, "[0].schedule is 409 bytes long, at most 256"},
		{"no duration", `[{"schedule":"0 22 * * 6"}]`, "[0].duration is required"},
		{"a negative duration", `[{"schedule":"0 22 * * 6","duration":"-1h"}]`, `[0].duration "-1h" is not a duration`},
		{"microseconds, which the CRD does not take either", `[{"schedule":"0 22 * * 6","duration":"1us"}]`, `[0].duration "1us" is not a duration`},
		{"a zero duration", `[{"schedule":"0 22 * * 6","duration":"0s"}]`, "[0].duration must be positive"},
		{"a duration as a number", `[{"schedule":"0 22 * * 6","duration":3600}]`, "duration is a JSON number, where a string is expected"},
		{"an unknown time zone", `[{"schedule":"0 22 * * 6","duration":"4h","timeZone":"Mars/Olympus"}]`, "[0].timeZone: unknown time zone Mars/Olympus"},
		{"a time zone too long", `[{"schedule":"0 22 * * 6","duration":"4h","timeZone":"` + strings.Repeat("A", 65) + `"}]`, "[0].timeZone is 65 bytes long, at most 64"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseClusterWindows(tt.value)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.says)
			assert.True(t, strings.HasPrefix(err.Error(), v1alpha1.MaintenanceWindowsAnnotation), "names the annotation: %v", err)
			assert.LessOrEqual(t, len(err.Error()), 400, "short enough for a member's status message")
		})
	}
}

// windowCluster gives a member a HostedCluster with the maintenance windows annotation value.
func windowCluster(m *Member, value string) *Member {
	return onCluster(m, func(hc *hosted.HostedCluster) {
		hc.Annotations = map[string]string{v1alpha1.MaintenanceWindowsAnnotation: value}
	})
}

// TestPlanClusterWindows covers how a HostedCluster's own maintenance windows gate its member.
func TestPlanClusterWindows(t *testing.T) {
	t.Parallel()
	// Wednesday 25 November 2026, 10:30 UTC.
	now := time.Date(2026, 11, 25, 10, 30, 0, 0, time.UTC)
	order := []string{"canary", "prod"}
	const (
		open   = `[{"schedule":"0 10 * * *","duration":"1h"}]`
		closed = `[{"schedule":"0 22 * * 6","duration":"4h","timeZone":"Europe/Berlin"}]`
		broken = `[{"schedule":"0 22 * * 6","duration":"4h","partitions":["prod"]}]`
	)
	// Saturday 28 November, 22:00 in Berlin.
	opens := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	two := intstr.FromInt32(2)
	strategy := v1alpha1.FleetRolloutStrategy{MaxUnavailable: &two, ProgressDeadline: &metav1.Duration{Duration: 24 * time.Hour}}
	// members: canaries c0..c3 and prod p0 p1, all Ready on "old", each on a HostedCluster.
	members := func() []*Member {
		var ms []*Member
		for i := range 4 {
			ms = append(ms, onCluster(planMember(fmt.Sprintf("c%d", i), "canary", "old", true, now), nil))
		}
		return append(ms, onCluster(planMember("p0", "prod", "old", true, now), nil), onCluster(planMember("p1", "prod", "old", true, now), nil))
	}
	decide := func(ms []*Member, stable string, gates Gates) Plan {
		return Decide(ms, order, "new", stable, strategy, nil, now, gates)
	}

	t.Run("a closed window keeps the member on its revision, listed with when it opens; it uses no budget", func(t *testing.T) {
		t.Parallel()
		ms := members()
		windowCluster(ms[0], closed)
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, ToStable, plan.Assign["c0"], "kept on the stable revision: drift is corrected")
		assert.Equal(t, 2, countAssigned(plan, ToTarget), "two others moved: the budget is theirs")
		assert.Equal(t, int32(1), plan.Partitions[0].WindowHeld)
		assert.Equal(t, int32(1), plan.Counts.WindowHeld)
		require.Len(t, plan.WindowHeld, 1)
		held := plan.WindowHeld[0]
		assert.Equal(t, "c0", held.Namespace)
		assert.Equal(t, "canary", held.Partition)
		assert.Equal(t, v1alpha1.OutsideClusterWindowReason, held.Reason)
		assert.Contains(t, held.Message, "HostedCluster clusters/c0: none of its maintenance windows (pkgsync.dev/maintenance-windows) is open")
		assert.Contains(t, held.Message, "2026-11-28T21:00:00Z")
		if assert.NotNil(t, held.OpensAt) {
			assert.Equal(t, opens, held.OpensAt.UTC())
		}
		assert.Equal(t, opens.Sub(now)+time.Second, plan.WakeAfter, "woken when the cluster's window opens")
		assert.Empty(t, plan.Held, "apart from members held by pkgsync.dev/hold")
	})
	t.Run("an open window lets the member move as the budget allows, and wakes the plan when it closes", func(t *testing.T) {
		t.Parallel()
		ms := members()
		windowCluster(ms[0], open)
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, ToTarget, plan.Assign["c0"])
		assert.Empty(t, plan.WindowHeld)
		assert.Equal(t, 30*time.Minute+time.Second, plan.WakeAfter)
	})
	t.Run("both must allow it: an open cluster window does not open a closed partition window", func(t *testing.T) {
		t.Parallel()
		ms := members()
		windowCluster(ms[0], open)
		plan := decide(ms, "old", Gates{Windows: windowsOf(t, v1alpha1.FleetWindow{Schedule: "0 22 * * *", Duration: metav1.Duration{Duration: time.Hour}})})
		assert.Equal(t, 0, countAssigned(plan, ToTarget))
		assert.Empty(t, plan.WindowHeld, "the partition's window holds it, not its cluster's")

		ms = members()
		windowCluster(ms[0], closed)
		plan = decide(ms, "old", Gates{Windows: windowsOf(t, v1alpha1.FleetWindow{Schedule: "0 10 * * *", Duration: metav1.Duration{Duration: time.Hour}})})
		assert.Equal(t, ToStable, plan.Assign["c0"], "an open partition window does not open a closed cluster window")
		assert.Len(t, plan.WindowHeld, 1)
	})
	t.Run("an annotation that cannot be read holds the member, saying what is wrong and how to fix it", func(t *testing.T) {
		t.Parallel()
		ms := members()
		windowCluster(ms[0], broken)
		windowCluster(ms[1], broken)
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, ToStable, plan.Assign["c0"])
		assert.Equal(t, ToStable, plan.Assign["c1"])
		assert.Equal(t, 2, countAssigned(plan, ToTarget), "the rest of the fleet goes on")
		require.Len(t, plan.WindowHeld, 2)
		held := plan.WindowHeld[0]
		assert.Equal(t, v1alpha1.InvalidClusterWindowsReason, held.Reason)
		assert.Nil(t, held.OpensAt)
		assert.Contains(t, held.Message, "HostedCluster clusters/c0: its annotation pkgsync.dev/maintenance-windows cannot be read")
		assert.Contains(t, held.Message, "[0].partitions")
		assert.Contains(t, held.Message, "remove it to let the cluster's members move at any time")
		assert.LessOrEqual(t, len(held.Message), 512, "within a member's status message")
	})
	t.Run("a schedule that never comes keeps the member, saying so", func(t *testing.T) {
		t.Parallel()
		ms := members()
		windowCluster(ms[0], `[{"schedule":"0 0 30 2 *","duration":"1h"}]`)
		plan := decide(ms, "old", Gates{})
		require.Len(t, plan.WindowHeld, 1)
		assert.Nil(t, plan.WindowHeld[0].OpensAt)
		assert.Contains(t, plan.WindowHeld[0].Message, "none opens again")
	})
	t.Run("a member moved while the window was open finishes", func(t *testing.T) {
		t.Parallel()
		ms := members()
		ms[0] = windowCluster(planMember("c0", "canary", "new", false, now), closed)
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, ToTarget, plan.Assign["c0"])
		assert.Empty(t, plan.WindowHeld)
		assert.Len(t, plan.InProgress, 1)
	})
	t.Run("a new cluster's first install is not held", func(t *testing.T) {
		t.Parallel()
		ms := append([]*Member{windowCluster(&Member{Namespace: "c9", Partition: "canary"}, closed)}, members()...)
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, ToTarget, plan.Assign["c9"], "the partition is being rolled out: created on the target within the budget")
		ms = append(members(), windowCluster(&Member{Namespace: "p9", Partition: "prod"}, broken))
		plan = decide(ms, "old", Gates{})
		assert.Equal(t, ToStable, plan.Assign["p9"], "a pending partition: created on the stable revision")
		assert.Empty(t, plan.WindowHeld)
	})
	t.Run("a member not Ready on its revision is not moved either", func(t *testing.T) {
		t.Parallel()
		ms := members()
		windowCluster(notReadyWith(ms[0], v1alpha1.ApplyFailedReason), closed)
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, ToStable, plan.Assign["c0"], "moving it would be a move")
		assert.Equal(t, 2, countAssigned(plan, ToTarget), "and it uses no budget")
	})
	t.Run("a window-held member holds no partition back once another proved the revision", func(t *testing.T) {
		t.Parallel()
		ms := members()
		for i := 1; i < 4; i++ {
			onRevision(ms[i], "new")
		}
		windowCluster(ms[0], closed)
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, "prod", plan.Current)
		assert.Equal(t, v1alpha1.PartitionComplete, plan.Partitions[0].State)
		assert.Equal(t, ToStable, plan.Assign["c0"])
		assert.Equal(t, 2, countAssigned(plan, ToTarget)-3, "prod moves within its budget")

		// Everything else on the target: the rollout is complete, the member waits aside.
		for _, m := range ms[4:] {
			onRevision(m, "new")
		}
		plan = decide(ms, "old", Gates{})
		assert.True(t, plan.Complete)
		assert.Len(t, plan.WindowHeld, 1)
		// With nothing left to roll out, it stays as it is, on a revision the fleet no longer
		// holds, until its window opens.
		plan = decide(ms, "new", Gates{})
		assert.Equal(t, keepAsIs, plan.Assign["c0"])
		assert.Len(t, plan.WindowHeld, 1)
		windowCluster(ms[0], open)
		plan = decide(ms, "new", Gates{})
		assert.Equal(t, ToTarget, plan.Assign["c0"], "its window open, it catches up at once")
		assert.Empty(t, plan.WindowHeld)
	})
	t.Run("a partition whose members are all window-held does not wave a revision through untested", func(t *testing.T) {
		t.Parallel()
		ms := members()
		for _, m := range ms[:4] {
			windowCluster(m, closed)
		}
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, "canary", plan.Current)
		assert.Equal(t, v1alpha1.PartitionProgressing, plan.Partitions[0].State)
		assert.Equal(t, 0, countAssigned(plan, ToTarget), "prod waits for a canary")
		assert.Equal(t, int32(4), plan.Counts.WindowHeld)
	})
	t.Run("a rollback is not held", func(t *testing.T) {
		t.Parallel()
		ms := members()
		ms[0] = windowCluster(stalled(planMember("c0", "canary", "new", false, now)), closed)
		ms[1] = windowCluster(planMember("c1", "canary", "new", true, now), closed)
		rollback := strategy
		rollback.OnFailure = v1alpha1.FleetFailureRollback
		plan := Decide(ms, order, "new", "old", rollback, nil, now, Gates{})
		assert.True(t, plan.Rejects)
		assert.Equal(t, ToStable, plan.Assign["c0"])
		assert.Equal(t, ToStable, plan.Assign["c1"])
		assert.Empty(t, plan.WindowHeld)
		assert.Zero(t, plan.Counts.WindowHeld)
	})
	t.Run("a hold wins", func(t *testing.T) {
		t.Parallel()
		ms := members()
		windowCluster(ms[0], closed).Cluster.Annotations[v1alpha1.HoldAnnotation] = "freeze"
		plan := decide(ms, "old", Gates{})
		assert.Equal(t, keepAsIs, plan.Assign["c0"])
		assert.Len(t, plan.Held, 1)
		assert.Empty(t, plan.WindowHeld)
	})
	t.Run("one value on many clusters is parsed once", func(t *testing.T) {
		t.Parallel()
		ms := members()
		for _, m := range ms {
			windowCluster(m, closed)
		}
		p := newPlanner("new", "old", strategy, nil, now, Gates{})
		for _, m := range ms {
			h := healthOf(m, time.Hour, now)
			p.applyClusterWindows(m, &h)
			assert.True(t, h.windowHeld)
		}
		assert.Len(t, p.clusterWindows, 1)
	})
}
