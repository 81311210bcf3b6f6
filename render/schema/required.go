package schema

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// requiredFields are fields the API server's validation requires of built-in kinds and their
// schema does not mark required (client-go's models mark few). Kept by hand, as enums.go's
// table: the ones a package most often lacks.
var requiredFields = map[schema.GroupKind][]string{
	{Group: "apps", Kind: "Deployment"}:  {"spec.selector", "spec.template"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec.selector", "spec.template"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec.selector", "spec.template"},
	{Group: "apps", Kind: "DaemonSet"}:   {"spec.selector", "spec.template"},
	{Group: "batch", Kind: "Job"}:        {"spec.template"},
	{Group: "batch", Kind: "CronJob"}:    {"spec.schedule", "spec.jobTemplate"},
}

// selectorKinds are the kinds whose spec.selector must select their pod template's labels.
var selectorKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "apps", Kind: "DaemonSet"}:   true,
}

// checkRequired reports the required fields obj lacks, a pod spec without containers, and a
// selector whose matchLabels the pod template's labels do not have (matchExpressions are not
// evaluated).
func checkRequired(obj *unstructured.Unstructured) []Problem {
	gk := obj.GroupVersionKind().GroupKind()
	var problems []Problem
	for _, f := range requiredFields[gk] {
		if !has(obj.Object, f) {
			problems = append(problems, Problem{Field: f, Detail: "required"})
		}
	}
	if spec, ok := podSpecPaths[gk]; ok && has(obj.Object, parentPath(spec)) {
		if items, _ := valueOf(obj.Object, spec+".containers").([]any); len(items) == 0 {
			problems = append(problems, Problem{Field: spec + ".containers", Detail: "required: a pod needs at least one container"})
		}
	}
	if selectorKinds[gk] {
		problems = append(problems, checkSelector(obj)...)
	}
	return problems
}

// checkSelector checks that the template's labels have every spec.selector.matchLabels.
func checkSelector(obj *unstructured.Unstructured) []Problem {
	want, _ := valueOf(obj.Object, "spec.selector.matchLabels").(map[string]any)
	labels, _ := valueOf(obj.Object, "spec.template.metadata.labels").(map[string]any)
	for k, v := range want {
		if labels[k] != v {
			return []Problem{{Field: "spec.template.metadata.labels", Detail: fmt.Sprintf(
				"must have the labels of spec.selector.matchLabels (%s: %v): the selector does not match the template's labels", k, v)}}
		}
	}
	return nil
}

// has tells whether the field at path (dot-separated, no lists) is set and not null.
func has(obj map[string]any, path string) bool {
	return valueOf(obj, path) != nil
}

// valueOf is the value at path (dot-separated, no lists), nil when absent.
func valueOf(obj map[string]any, path string) any {
	var found any
	eachField(obj, "", path, func(_ string, v any) { found = v })
	return found
}

// parentPath is path without its last field.
func parentPath(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' {
			return path[:i]
		}
	}
	return ""
}
