package apply

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/desired"
)

// mapConditions returns the conditions of a live object that mappings name, under their
// destination types. A condition the object's controller set for an older generation is left
// out: it does not describe what was just applied.
func mapConditions(live *unstructured.Unstructured, mappings []desired.ConditionMapping) []metav1.Condition {
	if len(mappings) == 0 || live == nil {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	var out []metav1.Condition
	for _, m := range mappings {
		for _, c := range conds {
			cm, ok := c.(map[string]any)
			if !ok || cm["type"] != m.Source {
				continue
			}
			if gen, ok, _ := unstructured.NestedInt64(cm, "observedGeneration"); ok && gen != live.GetGeneration() {
				break
			}
			status, _ := cm["status"].(string)
			reason, _ := cm["reason"].(string)
			message, _ := cm["message"].(string)
			if reason == "" {
				reason = "Mapped" // metav1.Condition requires one
			}
			if message == "" {
				message = fmt.Sprintf("%s: condition %s", RefOf(live), m.Source)
			}
			out = append(out, metav1.Condition{Type: m.Destination, Status: metav1.ConditionStatus(status), Reason: reason, Message: message})
			break
		}
	}
	return out
}
