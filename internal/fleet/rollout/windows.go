package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"
	// The time zones of spec.rollout.windows, whether or not the image has a zoneinfo database.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Window is a maintenance window of spec.rollout.windows, its schedule parsed.
type Window struct {
	schedule cron.Schedule
	duration time.Duration
	location *time.Location
	// partitions it applies to; nil: every partition.
	partitions []string
}

// cronParser reads the five fields of crontab(5) and its descriptors (@daily, @weekly...).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseWindows reads spec.rollout.windows. An error names the window and field: the spec
// cannot be acted on until it is fixed.
func ParseWindows(windows []v1alpha1.FleetWindow) ([]Window, error) {
	out := make([]Window, 0, len(windows))
	for i, w := range windows {
		parsed, err := parseWindow(fmt.Sprintf("spec.rollout.windows[%d]", i), w)
		if err != nil {
			return nil, err
		}
		out = append(out, parsed)
	}
	return out, nil
}

// parseWindow reads one window; an error names field, where the window is written.
func parseWindow(field string, w v1alpha1.FleetWindow) (Window, error) {
	loc := time.UTC
	if w.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(w.TimeZone); err != nil {
			return Window{}, fmt.Errorf("%s.timeZone: %w", field, err)
		}
	}
	// A "TZ=" or "CRON_TZ=" prefix, which the parser takes, would override timeZone.
	if strings.Contains(w.Schedule, "=") {
		return Window{}, fmt.Errorf("%s.schedule %q: name the time zone in timeZone, not in the schedule", field, w.Schedule)
	}
	sched, err := cronParser.Parse(w.Schedule)
	if err != nil {
		return Window{}, fmt.Errorf("%s.schedule %q: %w", field, w.Schedule, err)
	}
	if w.Duration.Duration <= 0 {
		return Window{}, fmt.Errorf("%s.duration must be positive", field)
	}
	return Window{schedule: sched, duration: w.Duration.Duration, location: loc, partitions: w.Partitions}, nil
}

// windowState is whether the windows of one partition are open at a time, and when that changes.
type windowState struct {
	open bool
	// edge is when the state changes next: the open window closes, or the next one opens
	// (zero when no window ever opens again).
	edge time.Time
}

// windowAt says whether a window that applies to partition is open at now, and when that
// changes; ok is false when none applies (the partition moves at any time). A window opened
// at a time t the schedule names is open during [t, t+duration). Overlapping windows join:
// the state closes at the end of the last one open.
func windowAt(windows []Window, partition string, now time.Time) (windowState, bool) {
	var applying []Window
	for _, w := range windows {
		if w.partitions == nil || slices.Contains(w.partitions, partition) {
			applying = append(applying, w)
		}
	}
	if len(applying) == 0 {
		return windowState{}, false
	}
	st := windowState{}
	var nextOpen time.Time
	for _, w := range applying {
		local := now.In(w.location)
		// A window open now opened within (now-duration, now]: the first start after
		// now-duration, when it is not after now.
		if start := w.schedule.Next(local.Add(-w.duration)); !start.IsZero() && !start.After(local) {
			st.open = true
			if end := start.Add(w.duration); end.After(st.edge) {
				st.edge = end
			}
		}
		if next := w.schedule.Next(local); !next.IsZero() && (nextOpen.IsZero() || next.Before(nextOpen)) {
			nextOpen = next
		}
	}
	if !st.open {
		st.edge = nextOpen
	}
	return st, true
}

// status reports a window state in a partition's status.
func (s windowState) status() *v1alpha1.FleetWindowStatus {
	out := &v1alpha1.FleetWindowStatus{Open: s.open}
	if !s.edge.IsZero() {
		t := metav1.NewTime(s.edge.UTC())
		if s.open {
			out.ClosesAt = &t
		} else {
			out.OpensAt = &t
		}
	}
	return out
}
