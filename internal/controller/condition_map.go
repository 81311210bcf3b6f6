package controller

import (
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/apply"
)

// reportMappedConditions sets the conditions a pass mapped from applied objects (Package
// Operator's condition-map) on the resource. Their types have a domain prefix, which the
// resource's own conditions never have. Once every phase was reached, a mapped condition no
// object reports any more is removed; until then the ones of phases not reached stay as they
// were last seen.
func reportMappedConditions(obj statusObject, res *apply.Result) {
	if res == nil {
		return
	}
	current := map[string]bool{}
	for i := range res.Conditions {
		c := res.Conditions[i]
		c.ObservedGeneration = obj.GetGeneration()
		conditions.Set(obj, &c)
		current[c.Type] = true
	}
	if !res.Complete() {
		return
	}
	for _, c := range append([]metav1.Condition(nil), obj.GetConditions()...) {
		if strings.Contains(c.Type, "/") && !current[c.Type] {
			conditions.Delete(obj, c.Type)
		}
	}
}
