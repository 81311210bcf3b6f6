package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// Bounds of a CEL check, those of spec.dependsOn's readyExpr: the schema bounds its length;
// the cost limit bounds one evaluation (per member); compiled programs are kept in a bounded
// cache.
const (
	celCostLimit = 100_000
	celNesting   = 32
	celPrograms  = 256
	// maxListed bounds how many members a check's message names.
	maxListed = 5
)

// DefaultInterval is spec.rollout.analysis.interval's default; MinInterval its floor.
const (
	DefaultInterval = 30 * time.Second
	MinInterval     = 5 * time.Second
)

// Interval is an analysis's interval, defaulted and floored.
func Interval(a *v1alpha1.FleetAnalysis) time.Duration {
	if a == nil || a.Interval == nil {
		return DefaultInterval
	}
	return max(a.Interval.Duration, MinInterval)
}

// Subject is a member a check is about.
type Subject struct {
	Namespace string
	Pkg       *v1alpha1.Package
	Cluster   *hosted.HostedCluster
}

// Verdict is what one evaluation found.
type Verdict struct {
	// Results per check, in the spec's order.
	Results []v1alpha1.FleetCheckStatus
	// Failed maps a member's namespace to why a check failed it.
	Failed map[string]string
	// Conclusive: no check is left inconclusive after onInconclusive (Pass and Fail decide).
	Conclusive bool
}

// Evaluator evaluates checks. Its zero value has no Prometheus: a query is inconclusive.
type Evaluator struct {
	// Prometheus answers the queries; nil when the controller has no --analysis-prometheus-address.
	Prometheus *Prometheus

	once     sync.Once
	env      *cel.Env
	envErr   error
	programs *lru.Cache
	mu       sync.Mutex
}

// Evaluate runs every check of a for the subjects of one partition's soak.
func (e *Evaluator) Evaluate(ctx context.Context, a *v1alpha1.FleetAnalysis, subjects []Subject, partition, revision string, since, now time.Time) Verdict {
	v := Verdict{Failed: map[string]string{}, Conclusive: true}
	for _, check := range a.Checks {
		st := v1alpha1.FleetCheckStatus{Name: check.Name, Partition: partition, Revision: revision,
			EvaluatedAt: metav1.NewTime(now.Truncate(time.Second)), Since: metav1.NewTime(since)}
		var failed map[string]string
		var err error
		if check.Query != nil {
			failed, st.Value, err = e.query(ctx, check.Query, subjects, now)
		} else {
			failed, err = e.cel(ctx, check.CEL, subjects)
			st.Value = strconv.Itoa(len(failed))
		}
		switch {
		case err != nil && a.OnInconclusive == v1alpha1.FleetInconclusiveFail:
			st.Result, st.Message = v1alpha1.FleetCheckFailed, "inconclusive, counted as failed (onInconclusive: Fail): "+err.Error()
			failed = map[string]string{}
			for _, s := range subjects {
				failed[s.Namespace] = err.Error()
			}
		case err != nil && a.OnInconclusive == v1alpha1.FleetInconclusivePass:
			st.Result, st.Message = v1alpha1.FleetCheckPassed, "inconclusive, let through (onInconclusive: Pass): "+err.Error()
		case err != nil:
			st.Result, st.Message = v1alpha1.FleetCheckInconclusive, err.Error()+" (onInconclusive: Wait: the partition soaks until it is conclusive)"
			v.Conclusive = false
		case len(failed) > 0:
			st.Result, st.Message = v1alpha1.FleetCheckFailed, describe(failed)
		default:
			st.Result = v1alpha1.FleetCheckPassed
		}
		for ns, why := range failed {
			if _, seen := v.Failed[ns]; !seen {
				v.Failed[ns] = "analysis check " + check.Name + ": " + why
			}
		}
		st.Message = boundMessage(st.Message)
		v.Results = append(v.Results, st)
	}
	return v
}

// query runs a query check: each sample is held to min and max, for the member its memberLabel
// names or, without one, for every subject.
func (e *Evaluator) query(ctx context.Context, q *v1alpha1.FleetMetricQuery, subjects []Subject, now time.Time) (map[string]string, string, error) {
	if e.Prometheus == nil {
		return nil, "", errors.New("the controller has no --analysis-prometheus-address")
	}
	lo, hi, err := bounds(q)
	if err != nil {
		return nil, "", err
	}
	samples, err := e.Prometheus.Query(ctx, q.PromQL, now)
	if err != nil {
		return nil, "", err
	}
	label := q.MemberLabel
	if label == "" {
		label = "namespace"
	}
	inPartition := map[string]bool{}
	for _, s := range subjects {
		inPartition[s.Namespace] = true
	}
	failed := map[string]string{}
	worst, counted := 0.0, 0
	for _, s := range samples {
		ns, forOne := s.Labels[label]
		if forOne && !inPartition[ns] {
			continue
		}
		counted++
		if counted == 1 || slack(s.Value, lo, hi) < slack(worst, lo, hi) {
			worst = s.Value
		}
		if s.Value >= lo && s.Value <= hi && !math.IsNaN(s.Value) {
			continue
		}
		why := fmt.Sprintf("value %s outside [%s, %s]", format(s.Value), format(lo), format(hi))
		if forOne {
			failed[ns] = why
			continue
		}
		for _, sub := range subjects {
			failed[sub.Namespace] = why + " (a sample without label " + label + ": for every member)"
		}
	}
	if counted == 0 {
		return nil, "", errors.New("the query returned no sample for the partition's members")
	}
	// A member without a sample of its own (and no sample for all) is not known to pass: its
	// exporter may be what the revision broke.
	if missing := uncovered(samples, label, subjects); len(missing) > 0 {
		return nil, "", fmt.Errorf("the query returned no sample for %s", describeNames(missing))
	}
	return failed, format(worst), nil
}

// uncovered are the subjects no sample speaks for.
func uncovered(samples []Sample, label string, subjects []Subject) []string {
	covered := map[string]bool{}
	for _, s := range samples {
		ns, forOne := s.Labels[label]
		if !forOne {
			return nil
		}
		covered[ns] = true
	}
	var missing []string
	for _, s := range subjects {
		if !covered[s.Namespace] {
			missing = append(missing, s.Namespace)
		}
	}
	return missing
}

func describeNames(names []string) string {
	slices.Sort(names)
	if len(names) > maxListed {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

func bounds(q *v1alpha1.FleetMetricQuery) (lo, hi float64, err error) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if q.Min != nil {
		if lo, err = strconv.ParseFloat(*q.Min, 64); err != nil {
			return 0, 0, fmt.Errorf("min %q is not a number", *q.Min)
		}
	}
	if q.Max != nil {
		if hi, err = strconv.ParseFloat(*q.Max, 64); err != nil {
			return 0, 0, fmt.Errorf("max %q is not a number", *q.Max)
		}
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("min %s is over max %s: no value passes", format(lo), format(hi))
	}
	return lo, hi, nil
}

// slack is how far v lies inside [lo, hi] from its nearer bound, negative outside: the worst
// value of a check is the one of least slack. NaN has the least.
func slack(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(-1)
	}
	return min(v-lo, hi-v)
}

func format(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// describe names the failed members, the first maxListed of them.
func describe(failed map[string]string) string {
	names := make([]string, 0, len(failed))
	for ns := range failed {
		names = append(names, ns)
	}
	slices.Sort(names)
	parts := make([]string, 0, maxListed+1)
	for i, ns := range names {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-i))
			break
		}
		parts = append(parts, ns+": "+failed[ns])
	}
	return fmt.Sprintf("%d member(s) failed: %s", len(failed), strings.Join(parts, "; "))
}

// maxMessage bounds a check's message in status and events: a query's error may quote the
// Prometheus' answer.
const maxMessage = 512

func boundMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
