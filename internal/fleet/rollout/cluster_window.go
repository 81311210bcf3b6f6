package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// The maintenance windows a HostedCluster names for every fleet's member on it
// (v1alpha1.MaintenanceWindowsAnnotation). They are read with the fleet's own windows' parser
// and evaluated as a partition's windows are (windowAt); what differs is where they come from:
// an annotation, which no schema checks, so the bounds spec.rollout.windows has in the CRD are
// checked here, before anything is parsed.

// Bounds of one window, as the CRD has them for spec.rollout.windows.
const (
	maxScheduleLength = 256
	maxTimeZoneLength = 64
)

// durationPattern is the CRD's pattern of spec.rollout.windows[].duration: time.ParseDuration
// alone would take "-1h" or "1µs".
var durationPattern = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`)

// clusterWindow is one window of the annotation as written: the fields of a FleetWindow, with
// the duration as text (checked against the CRD's pattern) and partitions kept only to refuse
// them.
type clusterWindow struct {
	Schedule   string          `json:"schedule"`
	Duration   string          `json:"duration"`
	TimeZone   string          `json:"timeZone"`
	Partitions json.RawMessage `json:"partitions"`
}

// ParseClusterWindows reads the value of a HostedCluster's pkgsync.dev/maintenance-windows
// annotation: a JSON list of 1 to v1alpha1.MaxClusterWindows windows {schedule, duration,
// timeZone} as spec.rollout.windows has them, at most v1alpha1.MaxClusterWindowsBytes long.
// Unknown fields are refused (a misspelt "time_zone" would otherwise read the schedule in UTC),
// and so is partitions: a cluster's windows apply to its members whatever their partition. An
// error says what is wrong, naming the window and field.
func ParseClusterWindows(value string) ([]Window, error) {
	const name = v1alpha1.MaintenanceWindowsAnnotation
	if len(value) > v1alpha1.MaxClusterWindowsBytes {
		return nil, fmt.Errorf("%s is %d bytes long, at most %d", name, len(value), v1alpha1.MaxClusterWindowsBytes)
	}
	trimmed := bytes.TrimSpace([]byte(value))
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, fmt.Errorf("%s is not a JSON list: write its windows in [...], even a single one", name)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var written []clusterWindow
	if err := dec.Decode(&written); err != nil {
		return nil, fmt.Errorf("%s is not a JSON list of windows: %s", name, jsonProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s has more after its list: one JSON list of windows is expected", name)
	}
	switch {
	case len(written) == 0:
		return nil, fmt.Errorf("%s lists no window: remove it to let the cluster's members move at any time, or hold them with %s", name, v1alpha1.HoldAnnotation)
	case len(written) > v1alpha1.MaxClusterWindows:
		return nil, fmt.Errorf("%s lists %d windows, at most %d", name, len(written), v1alpha1.MaxClusterWindows)
	}
	out := make([]Window, 0, len(written))
	for i, w := range written {
		field := fmt.Sprintf("%s[%d]", name, i)
		fw, err := w.fleetWindow(field)
		if err != nil {
			return nil, err
		}
		parsed, err := parseWindow(field, fw)
		if err != nil {
			return nil, err
		}
		out = append(out, parsed)
	}
	return out, nil
}

// fleetWindow checks a written window against the CRD's bounds of spec.rollout.windows and
// returns it as one.
func (w clusterWindow) fleetWindow(field string) (v1alpha1.FleetWindow, error) {
	switch {
	case w.Partitions != nil:
		return v1alpha1.FleetWindow{}, fmt.Errorf("%s.partitions: a HostedCluster's window applies to all of its members, whatever their partition: remove partitions (a fleet's spec.rollout.windows name partitions)", field)
	case w.Schedule == "":
		return v1alpha1.FleetWindow{}, fmt.Errorf("%s.schedule is required: a cron schedule such as \"0 22 * * 6\"", field)
	case len(w.Schedule) > maxScheduleLength:
		return v1alpha1.FleetWindow{}, fmt.Errorf("%s.schedule is %d bytes long, at most %d", field, len(w.Schedule), maxScheduleLength)
	case w.Duration == "":
		return v1alpha1.FleetWindow{}, fmt.Errorf("%s.duration is required: how long the window stays open, such as \"4h\"", field)
	case !durationPattern.MatchString(w.Duration):
		return v1alpha1.FleetWindow{}, fmt.Errorf("%s.duration %.32q is not a duration such as \"4h\" or \"90m\"", field, w.Duration)
	case len(w.TimeZone) > maxTimeZoneLength:
		return v1alpha1.FleetWindow{}, fmt.Errorf("%s.timeZone is %d bytes long, at most %d", field, len(w.TimeZone), maxTimeZoneLength)
	}
	d, err := time.ParseDuration(w.Duration)
	if err != nil {
		return v1alpha1.FleetWindow{}, fmt.Errorf("%s.duration %q: %w", field, w.Duration, err)
	}
	return v1alpha1.FleetWindow{Schedule: w.Schedule, Duration: metav1.Duration{Duration: d}, TimeZone: w.TimeZone}, nil
}

// jsonProblem says what encoding/json found wrong, without its Go type names.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field != "" {
			return fmt.Sprintf("%s is a JSON %s, where a string is expected", typeErr.Field, typeErr.Value)
		}
		return fmt.Sprintf("a JSON %s where a list of windows {\"schedule\", \"duration\", \"timeZone\"} is expected", typeErr.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// parsedClusterWindows is an annotation's value, parsed.
type parsedClusterWindows struct {
	windows []Window
	err     error
}

// clusterWindowsOf parses an annotation's value once per plan: the same value on many
// clusters, as a platform team writes it, is parsed once.
func (p *planner) clusterWindowsOf(value string) parsedClusterWindows {
	if parsed, ok := p.clusterWindows[value]; ok {
		return parsed
	}
	windows, err := ParseClusterWindows(value)
	parsed := parsedClusterWindows{windows: windows, err: err}
	p.clusterWindows[value] = parsed
	return parsed
}

// applyClusterWindows sets a member aside (windowHeld) while its HostedCluster's maintenance
// windows hold it: the cluster has the annotation, none of its windows is open now (or the
// annotation cannot be read: a cluster that asked for a freeze is not updated because of a
// typo), and the member is on another revision than the target, so that anything the plan
// did with it would be a move. The exemptions are a partition window's: a member on the
// target (moved while a window was open) goes on, a new cluster gets its first install, drift
// is corrected (standAside keeps the member on its revision), and a rollback is not held.
// Held and blocked members are that already. The plan wakes when the windows open or close.
func (p *planner) applyClusterWindows(m *Member, h *memberHealth) {
	if p.plan.RollingBack || h.held || h.blocked || m.Pkg == nil || m.Cluster == nil || m.Revision() == p.target {
		return
	}
	value, ok := m.Cluster.Annotations[v1alpha1.MaintenanceWindowsAnnotation]
	if !ok {
		return
	}
	cluster := "HostedCluster " + m.Cluster.Namespace + "/" + m.Cluster.Name
	parsed := p.clusterWindowsOf(value)
	if parsed.err != nil {
		*h = memberHealth{ready: h.ready, windowHeld: true, reason: v1alpha1.InvalidClusterWindowsReason, message: fmt.Sprintf(
			"%s: its annotation %s cannot be read, so the member moves to no other revision until it is fixed: %v; fix it (a JSON list of at most %d windows {\"schedule\", \"duration\", \"timeZone\"}) or remove it to let the cluster's members move at any time",
			cluster, v1alpha1.MaintenanceWindowsAnnotation, parsed.err, v1alpha1.MaxClusterWindows)}
		return
	}
	st, _ := windowAt(parsed.windows, "", p.now)
	if !st.edge.IsZero() {
		p.wake(st.edge.Sub(p.now) + time.Second)
	}
	if st.open {
		return
	}
	msg := fmt.Sprintf("%s: none of its maintenance windows (%s) is open; the member moves to another revision once one opens, at %s",
		cluster, v1alpha1.MaintenanceWindowsAnnotation, st.edge.UTC().Format(time.RFC3339))
	if st.edge.IsZero() {
		msg = fmt.Sprintf("%s: none of its maintenance windows (%s) is open, and none opens again in the next five years: fix or remove the annotation",
			cluster, v1alpha1.MaintenanceWindowsAnnotation)
	}
	*h = memberHealth{ready: h.ready, windowHeld: true, reason: v1alpha1.OutsideClusterWindowReason, message: msg, opensAt: st.edge}
}
