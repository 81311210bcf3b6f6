package probing

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition passes when the object reports a status condition of Type with Status, observed at
// the object's current generation when the condition records one.
type Condition struct {
	Type, Status string
}

// Probe implements Prober.
func (c Condition) Probe(_ context.Context, obj *unstructured.Unstructured) ([]string, error) {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, e := range conditions {
		cond, ok := e.(map[string]any)
		if !ok || cond["type"] != c.Type {
			continue
		}
		if cond["status"] != c.Status {
			return []string{fmt.Sprintf("%s=%v, want %s", c.Type, cond["status"], c.Status)}, nil
		}
		if og, ok := cond["observedGeneration"].(int64); ok && og != obj.GetGeneration() {
			return []string{fmt.Sprintf("%s=%s is from generation %d, object is at %d", c.Type, c.Status, og, obj.GetGeneration())}, nil
		}
		return nil, nil
	}
	return []string{fmt.Sprintf("condition %s not reported", c.Type)}, nil
}
