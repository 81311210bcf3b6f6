package apply

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// maxFailureConditions bounds how many of an object's conditions a failure reason quotes, and
// maxConditionMessage each one's message: the object's status is written by whoever writes
// the object, and the reason ends up in the resource's status.
const (
	maxFailureConditions = 3
	maxConditionMessage  = 256
)

// failureConditions returns, for an object kstatus found Failed, the conditions in which the
// object says so itself, "Type=Status Reason: message" each: a Deployment's Progressing=False
// ProgressDeadlineExceeded with the ReplicaSet that timed out, a Job's Failed=True
// BackoffLimitExceeded. kstatus's own message ("Progress deadline exceeded") does not carry
// the object's reason, which is what a user searches for and what `kubectl describe` shows.
func failureConditions(live *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	var out []string
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || len(out) == maxFailureConditions {
			continue
		}
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		if !conditionSaysFailed(typ, st) {
			continue
		}
		s := typ + "=" + st
		if reason, _ := m["reason"].(string); reason != "" {
			s += " " + reason
		}
		if msg, _ := m["message"].(string); msg != "" {
			if len(msg) > maxConditionMessage {
				msg = msg[:maxConditionMessage] + "…"
			}
			s += ": " + msg
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s)", strings.Join(out, "; "))
}

// conditionSaysFailed reports whether a condition is one of those kstatus reads a failure from:
// the progress or readiness conditions false, or a failure condition true.
func conditionSaysFailed(typ, status string) bool {
	switch typ {
	case "Progressing", "Ready", "Available", "Complete":
		return status == "False"
	case "Failed", "Stalled", "ReplicaFailure":
		return status == "True"
	}
	return false
}
