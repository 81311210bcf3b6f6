package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"pkgsync.dev/pkgsync/apply/probing"
)

// availabilityError is a failure to evaluate a probe on an object that was applied.
type availabilityError struct{ err error }

func (e *availabilityError) Error() string { return e.err.Error() }

func (e *availabilityError) Unwrap() error { return e.err }

// crdKind returns the group and kind a CustomResourceDefinition defines.
func crdKind(obj *unstructured.Unstructured) (schema.GroupKind, bool) {
	if obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
		return schema.GroupKind{}, false
	}
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}, kind != ""
}

func crdEstablished(live *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// availability returns why a live object is not available: kstatus must say Current and every
// probe selecting the object must pass. failed says kstatus found it Failed (a Deployment past
// its progress deadline, a Job that failed): the object itself says that waiting will not help,
// and the first reason is kstatus's.
func availability(ctx context.Context, live *unstructured.Unstructured, probes probing.Prober) (reasons []string, failed bool, err error) {
	res, err := status.Compute(live)
	if err != nil {
		reasons = append(reasons, "kstatus: "+err.Error())
	} else if res.Status != status.CurrentStatus {
		failed = res.Status == status.FailedStatus
		reason := fmt.Sprintf("kstatus %s: %s", res.Status, res.Message)
		if failed {
			reason += failureConditions(live)
		}
		reasons = append(reasons, reason)
	}
	probeReasons, err := probes.Probe(ctx, live)
	if err != nil {
		return nil, false, err
	}
	return append(reasons, probeReasons...), failed, nil
}
