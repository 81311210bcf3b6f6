package applier

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/reconciler/reconcilertest"
	"pkgsync.dev/pkgsync/render"
)

func TestPhasesToStatusCapsObjects(t *testing.T) {
	t.Parallel()
	res := &apply.Result{Phases: []apply.PhaseResult{
		{Name: "one", State: v1alpha1.PhaseComplete},
		{Name: "two", State: v1alpha1.PhaseProgressing},
		{Name: "three", State: v1alpha1.PhasePending},
	}}
	for i := range 15 {
		res.Phases[1].NotAvailable = append(res.Phases[1].NotAvailable, apply.ObjectStatus{Ref: apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Name: fmt.Sprint(i)}, Reason: "waiting"})
	}
	phases, current := phasesToStatus(res)
	assert.Equal(t, "two", current)
	require.Len(t, phases, 3)
	assert.Len(t, phases[1].NotAvailable, maxNotAvailable+1)
	assert.Equal(t, "and 5 more", phases[1].NotAvailable[maxNotAvailable].Reason)

	// A reason quotes the object's status, written by whoever writes the object: bounded and
	// one printable line.
	res.Phases[1].NotAvailable[0].Reason = "kstatus InProgress: \x1b[2J" + strings.Repeat("x", 64<<10)
	phases, _ = phasesToStatus(res)
	assert.LessOrEqual(t, len(phases[1].NotAvailable[0].Reason), maxNotAvailableReason)
	assert.NotContains(t, phases[1].NotAvailable[0].Reason, "\x1b")
}

// TestConclude: what each outcome of an apply pass makes of the conditions and when the
// resource is reconciled again. No outcome has an error for the work queue (conclude returns
// none): failures are retried on the retry interval (a hosted cluster or registry that comes
// back is noticed within it), not on the work queue's backoff.
func TestConclude(t *testing.T) {
	t.Parallel()
	const interval, retry, progress = time.Hour, time.Minute, 2 * time.Second
	complete := &apply.Result{Phases: []apply.PhaseResult{{Name: "deploy", State: v1alpha1.PhaseComplete}}}
	waiting := &apply.Result{Phases: []apply.PhaseResult{{Name: "deploy", State: v1alpha1.PhaseProgressing}}}
	// The times of these errors are taken when the case runs, not when the table is made.
	circuitOpen := func(nextProbe time.Duration) func() error {
		return func() error {
			return &apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Err: &hosted.UnavailableError{
				Namespace: "clusters-a", Err: errors.New("timeout"), NextProbe: time.Now().Add(nextProbe)}}
		}
	}
	paused := func(until time.Duration) func() error {
		return func() error {
			return &apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Err: &PausedError{Cluster: "clusters/a", until: time.Now().Add(until)}}
		}
	}
	fixed := func(err error) func() error { return func() error { return err } }
	retrying := func(reason string) reconcilertest.Conditions {
		return reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: reason, ReconcilingReason: v1alpha1.ProgressingWithRetryReason}
	}
	stalled := func(reason string) reconcilertest.Conditions {
		return reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: reason, StalledBy: reason}
	}
	tests := []struct {
		name     string
		res      *apply.Result
		err      func() error // nil: none
		want     reconcilertest.Conditions
		min, max time.Duration // bounds of RequeueAfter
	}{
		{"complete: the interval", complete, nil,
			reconcilertest.Conditions{Ready: metav1.ConditionTrue, ReadyReason: v1alpha1.ReconciliationSucceededReason}, interval * 9 / 10, interval * 11 / 10},
		{"nothing to apply: the interval", nil, nil,
			reconcilertest.Conditions{Ready: metav1.ConditionTrue, ReadyReason: v1alpha1.ReconciliationSucceededReason}, interval * 9 / 10, interval * 11 / 10},
		{"waiting on availability: the progress interval", waiting, nil,
			reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.PhaseProgressingReason, ReconcilingReason: v1alpha1.PhaseProgressingReason}, progress, progress},
		{"transient: the retry interval", nil, fixed(reconciler.PullFailed(errors.New("connection refused"))), retrying(v1alpha1.PullFailedReason), retry, retry},
		{"transient with a partial result: the retry interval", waiting, fixed(&apply.ConflictError{}), retrying(v1alpha1.ConflictReason), retry, retry},
		{"invalid config stalls until the spec changes", nil, fixed(&render.ConfigError{Field: "replicas"}), stalled(v1alpha1.InvalidConfigReason), interval * 9 / 10, interval * 11 / 10},
		{"a broken package stalls", nil, fixed(render.Errors{&render.Error{File: "a.yaml", Err: errors.New("bad")}}), stalled(v1alpha1.RenderFailedReason), interval * 9 / 10, interval * 11 / 10},
		{"signatures required stalls", nil, fixed(&reconciler.StageError{Reason: v1alpha1.VerificationRequiredReason, Err: errors.New("no spec.verify")}), stalled(v1alpha1.VerificationRequiredReason), interval * 9 / 10, interval * 11 / 10},
		{"a bad range stalls", nil, fixed(&reconciler.StageError{Reason: v1alpha1.InvalidVersionRangeReason, Err: errors.New("not a range")}), stalled(v1alpha1.InvalidVersionRangeReason), interval * 9 / 10, interval * 11 / 10},
		{"a failed verification is retried", nil, fixed(&reconciler.StageError{Reason: v1alpha1.VerificationFailedReason, Err: errors.New("unsigned")}), retrying(v1alpha1.VerificationFailedReason), retry, retry},
		{"no matching version waits for the interval", nil, fixed(&reconciler.StageError{Reason: v1alpha1.NoMatchingVersionReason, Err: errors.New("none")}), retrying(v1alpha1.NoMatchingVersionReason), interval * 9 / 10, interval * 11 / 10},
		{"an open circuit waits for its next probe", nil, circuitOpen(10 * time.Minute), retrying(v1alpha1.HostedClusterUnavailableReason), 10*time.Minute - time.Second, 10*time.Minute + time.Second},
		{"an open circuit probed soon: the retry interval", nil, circuitOpen(time.Second), retrying(v1alpha1.HostedClusterUnavailableReason), retry, retry},
		{"a pause that ends before the retry: its end", nil, paused(10 * time.Second), retrying(v1alpha1.HostedClusterUnavailableReason), 9 * time.Second, 11 * time.Second},
		{"a pause that ends after the retry: the retry interval", nil, paused(time.Hour), retrying(v1alpha1.HostedClusterUnavailableReason), retry, retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pkg := &v1alpha1.Package{}
			// What an earlier outcome left must not survive this one.
			conditions.MarkStalled(pkg, "Earlier", "earlier")
			conditions.MarkReconciling(pkg, "Earlier", "earlier")
			var passErr error
			if tt.err != nil {
				passErr = tt.err()
			}
			res := Conclude(t.Context(), pkg, tt.res, passErr, reconciler.Intervals{Interval: interval, Retry: retry, Progress: progress}, "applied")
			assert.GreaterOrEqual(t, res.RequeueAfter, tt.min)
			assert.LessOrEqual(t, res.RequeueAfter, tt.max)
			reconcilertest.AssertConditions(t, pkg, tt.want)
			if passErr != nil {
				assert.Equal(t, passErr.Error(), conditions.GetMessage(pkg, meta.ReadyCondition))
			}
		})
	}
}
