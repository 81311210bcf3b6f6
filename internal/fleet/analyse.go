package fleet

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/analysis"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
)

// analyses keeps each fleet's last analysis verdict: the checks are evaluated once per
// interval, not once per reconcile (a member's every status change wakes its fleet), and a
// failure holds its partition until an evaluation passes. A restart forgets them: the checks
// are evaluated again at once.
type analyses struct {
	evaluator *analysis.Evaluator
	mu        sync.Mutex
	memo      map[string]*analysisMemo
}

type analysisMemo struct {
	partition, revision string
	since, at           time.Time
	verdict             analysis.Verdict
}

func newAnalyses(prometheus *analysis.Prometheus) *analyses {
	return &analyses{evaluator: &analysis.Evaluator{Prometheus: prometheus}, memo: map[string]*analysisMemo{}}
}

func (a *analyses) get(fleet string) *analysisMemo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.memo[fleet]
}

func (a *analyses) put(fleet string, m *analysisMemo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.memo[fleet] = m
}

func (a *analyses) forget(fleet string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.memo, fleet)
}

// analyse evaluates spec.rollout.analysis for the partition that soaks (as the fleet's status
// left it), or for the partition whose members the last verdict failed while the target is the
// same, when the interval has passed; it keeps the results in status.analysis and returns the
// gate the planner decides with (nil without an analysis).
func (r *fleetSteps) analyse(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, target *v1alpha1.FleetRevision, members []*rollout.Member, now time.Time) *rollout.AnalysisGate {
	spec := fleet.Spec.Rollout.Analysis
	if spec == nil || target.Name == stableName(fleet) {
		r.analyses.forget(fleet.Name)
		if spec == nil {
			fleet.Status.Analysis = nil
		}
		return nil
	}
	interval := analysis.Interval(spec)
	gate := &rollout.AnalysisGate{Interval: interval}
	memo := r.analyses.get(fleet.Name)
	partition, since, soaking := soakingPartition(fleet.Status.Partitions)
	if !soaking {
		var failing bool
		if partition, since, failing = failingPartition(memo, fleet.Status.Analysis, target.Name); !failing {
			return gate
		}
	}
	// A soak ends on an evaluation made once it has lasted its whole length, not on one from its
	// first seconds.
	soakEnd := since.Add(soakOf(fleet.Spec.Rollout.Soak, interval))
	due := memo == nil || memo.partition != partition || memo.revision != target.Name || !memo.since.Equal(since) || now.Sub(memo.at) >= interval ||
		(soaking && memo.at.Before(soakEnd) && !now.Before(soakEnd))
	if due {
		var subjects []analysis.Subject
		for _, m := range members {
			if m.Partition == partition && m.Revision() == target.Name {
				subjects = append(subjects, analysis.Subject{Namespace: m.Namespace, Pkg: m.Pkg, Cluster: m.Cluster})
			}
		}
		// One evaluation is bounded as a whole, whatever its checks: it runs within a reconcile.
		evalCtx, cancel := context.WithTimeout(ctx, min(interval, maxEvaluation))
		next := &analysisMemo{partition: partition, revision: target.Name, since: since, at: now,
			verdict: r.analyses.evaluator.Evaluate(evalCtx, spec, subjects, partition, target.Name, since, now)}
		cancel()
		r.announceAnalysis(fleet, memo, next)
		r.analyses.put(fleet.Name, next)
		memo = next
	}
	fleet.Status.Analysis = memo.verdict.Results
	gate.Partition, gate.Failed = memo.partition, memo.verdict.Failed
	gate.Passed = soaking && memo.since.Equal(since) && !memo.at.Before(soakEnd) && memo.verdict.Conclusive && len(memo.verdict.Failed) == 0
	return gate
}

// maxEvaluation bounds one evaluation of every check of a fleet.
const maxEvaluation = 15 * time.Second

// soakOf is a partition's soak with an analysis: spec.rollout.soak, at least one interval (as
// the planner has it).
func soakOf(soak *metav1.Duration, interval time.Duration) time.Duration {
	if soak == nil {
		return interval
	}
	return max(soak.Duration, interval)
}

// failingPartition is the partition whose members the last verdict on the target failed, and
// the soak it was evaluated in: from memory, or after a restart from status.analysis, so that
// a halt the checks caused holds until they pass, across restarts too.
func failingPartition(memo *analysisMemo, last []v1alpha1.FleetCheckStatus, target string) (string, time.Time, bool) {
	if memo != nil {
		return memo.partition, memo.since, memo.revision == target && len(memo.verdict.Failed) > 0
	}
	for _, res := range last {
		if res.Revision == target && res.Result == v1alpha1.FleetCheckFailed {
			return res.Partition, res.Since.Time, true
		}
	}
	return "", time.Time{}, false
}

// soakingPartition is the partition the fleet's status says soaks, and since when.
func soakingPartition(partitions []v1alpha1.PartitionStatus) (string, time.Time, bool) {
	for _, p := range partitions {
		if p.State == v1alpha1.PartitionSoaking {
			return p.Name, p.LastTransitionTime.Time, true
		}
	}
	return "", time.Time{}, false
}

// announceAnalysis emits a Warning event per check that failed in next and had not failed in
// the previous verdict of the same partition and revision.
func (r *fleetSteps) announceAnalysis(fleet *v1alpha1.HostedClusterPackage, prev, next *analysisMemo) {
	before := map[string]v1alpha1.FleetCheckResult{}
	if prev != nil && prev.partition == next.partition && prev.revision == next.revision {
		for _, res := range prev.verdict.Results {
			before[res.Name] = res.Result
		}
	}
	for _, res := range next.verdict.Results {
		if res.Result == v1alpha1.FleetCheckFailed && before[res.Name] != v1alpha1.FleetCheckFailed {
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, v1alpha1.AnalysisFailedReason, "partition %s: analysis check %s failed on %s: %s",
				partitionName(next.partition), res.Name, next.revision, res.Message)
		}
	}
}
