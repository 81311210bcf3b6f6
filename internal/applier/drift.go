package applier

import (
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// maxDriftedObjects bounds the drifted objects listed in status (each with at most
// apply.MaxDriftPaths fields): a package of thousands of objects that all drifted must not push
// its status past the size limit of an object. status.drift.count has the total.
const maxDriftedObjects = 20

// maxDriftInMessage bounds the objects the Drifted condition and its event name.
const maxDriftInMessage = 3

// driftReport records what an apply pass found drifted.
type driftReport struct {
	recorder record.EventRecorder
	metrics  *reconciler.Metrics
	kind     string
}

// Record stores the drift a pass left uncorrected (spec.driftPolicy Report) in status.drift, the
// Drifted condition and the pkgsync_drifted_objects gauge, and sends an event when the set of
// drifted objects changes. Drift that was corrected is counted in
// pkgsync_drift_corrected_objects_total. A pass that did not run (res nil) changes nothing.
// status.drift lists what the last pass reached: a pass that stops at a phase that is not
// complete does not see the objects of later phases.
func (d driftReport) Record(obj reconciler.Object, status *v1alpha1.ApplyStatus, policy v1alpha1.DriftPolicy, res *apply.Result) {
	if res == nil {
		return
	}
	var left []apply.Drift
	corrected := 0
	for _, dr := range res.Drift {
		if dr.Corrected {
			corrected++
		} else {
			left = append(left, dr)
		}
	}
	if d.metrics != nil && corrected > 0 {
		d.metrics.DriftCorrected.WithLabelValues(d.kind).Add(float64(corrected))
	}
	if d.metrics != nil {
		labels := prometheus.Labels{"kind": d.kind, "namespace": obj.GetNamespace(), "name": obj.GetName()}
		if policy == v1alpha1.DriftReport {
			d.metrics.Drifted.With(labels).Set(float64(len(left)))
		} else {
			d.metrics.Drifted.Delete(labels)
		}
	}

	old := conditions.Get(obj, v1alpha1.DriftedCondition)
	if len(left) == 0 {
		status.Drift = nil
		if old != nil {
			conditions.Delete(obj, v1alpha1.DriftedCondition)
			if d.recorder != nil {
				d.recorder.Event(obj, corev1.EventTypeNormal, v1alpha1.DriftResolvedReason, "no drifted object left")
			}
		}
		return
	}
	status.Drift = driftToStatus(left)
	msg := driftMessage(left)
	conditions.MarkTrue(obj, v1alpha1.DriftedCondition, v1alpha1.DriftDetectedReason, "%s", msg)
	if d.recorder != nil && (old == nil || old.Message != msg) {
		d.recorder.Event(obj, corev1.EventTypeWarning, v1alpha1.DriftDetectedReason, msg)
	}
}

// Forget drops the gauge of a resource that is gone.
func (d driftReport) Forget(obj reconciler.Object) {
	if d.metrics != nil {
		d.metrics.Drifted.Delete(prometheus.Labels{"kind": d.kind, "namespace": obj.GetNamespace(), "name": obj.GetName()})
	}
}

// driftToStatus reports the drifted objects, bounded.
func driftToStatus(left []apply.Drift) *v1alpha1.DriftStatus {
	out := &v1alpha1.DriftStatus{Count: int32(len(left))}
	for i, dr := range left {
		if i == maxDriftedObjects {
			break
		}
		out.Objects = append(out.Objects, v1alpha1.DriftedObject{Object: dr.Ref.String(), Paths: dr.Paths, MorePaths: int32(dr.More)})
	}
	return out
}

// driftMessage names the first drifted objects and their fields, for the condition and the event.
func driftMessage(left []apply.Drift) string {
	parts := make([]string, 0, maxDriftInMessage)
	for i, dr := range left {
		if i == maxDriftInMessage {
			break
		}
		paths := strings.Join(dr.Paths, ", ")
		if dr.More > 0 {
			paths += fmt.Sprintf(" and %d more", dr.More)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", dr.Ref, paths))
	}
	msg := fmt.Sprintf("%d objects drifted and were left as they are (driftPolicy Report): %s", len(left), strings.Join(parts, "; "))
	if len(left) == 1 {
		msg = "1 object drifted and was left as it is (driftPolicy Report): " + parts[0]
	}
	if len(left) > maxDriftInMessage {
		msg += fmt.Sprintf("; and %d more (status.drift)", len(left)-maxDriftInMessage)
	}
	return msg
}
