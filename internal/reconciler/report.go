package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Report writes what a reconcile found: the status through its statusPatcher (the only writer
// of status, one request per write), metrics and an event when Ready changes.
type Report struct {
	obj      Object
	status   CommonStatus
	patcher  *statusPatcher
	metrics  runtimectrl.Metrics
	recorder record.EventRecorder
	start    time.Time
	oldReady *metav1.Condition
	// oldConditions are the conditions as the reconcile found them.
	oldConditions []metav1.Condition
	// acknowledge records the reconcile request being handled in the final patch.
	acknowledge bool
	// observed reports whether the outcome is the generation's (Steps.observed).
	observed func() bool
	// written is set once the final patch succeeded.
	written bool
	// failed is set when a step of the kind failed and is retried (lifecycle.failed): the
	// outcome is not the generation's, whatever the kind says.
	failed bool
}

func BeginReport(c client.Client, obj Object, status CommonStatus, m runtimectrl.Metrics, rec record.EventRecorder) *Report {
	return &Report{
		obj: obj, status: status, patcher: newStatusPatcher(obj, c), metrics: m, recorder: rec,
		start: time.Now(), oldReady: conditions.Get(obj, meta.ReadyCondition).DeepCopy(),
		oldConditions: slices.Clone(obj.GetConditions()),
	}
}

// ensureFinalizer adds pkgsync's finalizer and writes it before anything is applied, so that no
// object can exist without teardown being guaranteed. The reconcile then goes on in the same
// pass instead of waiting for its own update to come back through the watch.
func (r *Report) ensureFinalizer(ctx context.Context) error {
	if controllerutil.ContainsFinalizer(r.obj, v1alpha1.FinalizerName) {
		return nil
	}
	controllerutil.AddFinalizer(r.obj, v1alpha1.FinalizerName)
	if err := r.patcher.patch(ctx, r.obj); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// Save writes the status now, in the middle of a reconcile: the intended inventory before the
// apply engine creates objects, so that a crash cannot orphan them. The conditions the pass set
// so far (Reconciling) go with it, in the same request: a long first apply shows its progress.
func (r *Report) Save(ctx context.Context) error {
	if err := r.patcher.patch(ctx, r.obj); err != nil {
		return fmt.Errorf("record status: %w", err)
	}
	return nil
}

// finish patches the status and returns the reconcile error joined with any patch error. The
// generation is recorded as observed (the one rule for every kind) when the reconcile neither
// returned an error nor ended in a failure that is retried, and the kind calls its outcome the
// generation's.
func (r *Report) finish(ctx context.Context, retErr error) error {
	if r.acknowledge {
		acknowledgeRequest(r.obj, r.status)
	}
	if retErr == nil && !r.failed && r.observed != nil && r.observed() {
		*r.status.ObservedGeneration = r.obj.GetGeneration()
	}
	keepTransitionTimes(r.obj, r.oldConditions)
	err := r.patcher.patch(ctx, r.obj)
	r.written = err == nil
	if err != nil {
		// Returned to the work queue: a status write that fails cannot report itself in status
		// (lifecycle.failed). A resource whose finalizer was just removed is gone: nothing to
		// report on.
		if !r.obj.GetDeletionTimestamp().IsZero() && apierrors.IsNotFound(err) {
			err = nil
		}
		retErr = errors.Join(retErr, err)
	}
	r.metrics.RecordDuration(ctx, r.obj, r.start)
	r.metrics.RecordReadiness(ctx, r.obj)
	announce(r.recorder, r.obj, r.oldReady)
	return retErr
}

// keepTransitionTimes gives each condition that ends a reconcile as it began (same status,
// reason and message) its old transition time back. A reconcile may mark a condition on the way
// (Reconciling "reconciling IMAGE" before the pass concludes) and Flux's condition setter stamps a
// new transition time on every change: without this, a retry that ends where the last one did
// (a hosted cluster that is still unreachable) would still write the status.
func keepTransitionTimes(obj Object, old []metav1.Condition) {
	current := obj.GetConditions()
	changed := false
	for i := range current {
		for _, o := range old {
			if o.Type == current[i].Type && o.Status == current[i].Status && o.Reason == current[i].Reason &&
				o.Message == current[i].Message && !o.LastTransitionTime.Equal(&current[i].LastTransitionTime) {
				current[i].LastTransitionTime = o.LastTransitionTime
				changed = true
			}
		}
	}
	if changed {
		obj.SetConditions(current)
	}
}

// acknowledgeRequest records a reconcile.fluxcd.io/requestedAt request as handled. A suspended
// resource acknowledges it too, so that the requester can tell the request was seen and that
// nothing was applied because of the suspension.
func acknowledgeRequest(obj client.Object, status CommonStatus) {
	if token, ok := meta.ReconcileAnnotationValue(obj.GetAnnotations()); ok {
		status.Request.SetLastHandledReconcileRequest(token)
	}
}

// announce emits an event when Ready changes status or reason, for every kind: Normal when it
// turns true or when its reason is progress without trouble (quietReasons), Warning otherwise.
// A new message under the same status and reason (a progressing pass's next object, a retry's
// new error text, a HostedCluster's own message) is no transition: it is in the status, and an
// Event per pass would cost the API server a write per pass. A fleet's progress within a
// rollout is told by its partition events, not by one event per member.
func announce(rec record.EventRecorder, obj Object, old *metav1.Condition) {
	now := conditions.Get(obj, meta.ReadyCondition)
	if rec == nil || now == nil {
		return
	}
	if old != nil && old.Status == now.Status && old.Reason == now.Reason {
		return
	}
	eventType := corev1.EventTypeNormal
	if now.Status == metav1.ConditionFalse && !quietReasons[now.Reason] {
		eventType = corev1.EventTypeWarning
	}
	rec.Event(obj, eventType, now.Reason, now.Message)
}

// quietReasons are the reasons of a Ready=False that is progress, not trouble: a phase or a
// rollout under way, a rollout paused by its spec, a deletion waiting for what it deletes.
var quietReasons = map[string]bool{
	v1alpha1.PhaseProgressingReason:   true,
	v1alpha1.RolloutProgressingReason: true,
	v1alpha1.RolloutPausedReason:      true,
	v1alpha1.DeletingReason:           true,
}
