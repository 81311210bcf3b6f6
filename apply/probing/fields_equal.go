package probing

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"
)

// FieldsEqual passes when the fields at two paths (client-go JSONPath, such as
// .status.readyReplicas) are both set and hold equal values: each a Subset of the other, so
// numbers compare by value.
type FieldsEqual struct {
	FieldA, FieldB string
}

// NewFieldsEqual returns the probe, or why a path does not parse.
func NewFieldsEqual(fieldA, fieldB string) (FieldsEqual, error) {
	for _, f := range []string{fieldA, fieldB} {
		if _, err := parseFieldPath(f); err != nil {
			return FieldsEqual{}, err
		}
	}
	return FieldsEqual{FieldA: fieldA, FieldB: fieldB}, nil
}

// Probe implements Prober.
func (f FieldsEqual) Probe(_ context.Context, obj *unstructured.Unstructured) ([]string, error) {
	a, okA := fieldValue(obj, f.FieldA)
	b, okB := fieldValue(obj, f.FieldB)
	switch {
	case !okA:
		return []string{fmt.Sprintf("probe: %s not set", f.FieldA)}, nil
	case !okB:
		return []string{fmt.Sprintf("probe: %s not set", f.FieldB)}, nil
	case !Subset(a, b) || !Subset(b, a):
		return []string{fmt.Sprintf("probe: %s (%v) != %s (%v)", f.FieldA, a, f.FieldB, b)}, nil
	}
	return nil, nil
}

// parseFieldPath accepts the probe field syntax: a JSONPath such as .status.readyReplicas, with
// or without the surrounding braces.
func parseFieldPath(path string) (*jsonpath.JSONPath, error) {
	expr := strings.TrimSpace(path)
	if !strings.HasPrefix(expr, "{") {
		expr = "{" + expr + "}"
	}
	jp := jsonpath.New("probe")
	if err := jp.Parse(expr); err != nil {
		return nil, fmt.Errorf("field path %q: %w", path, err)
	}
	return jp, nil
}

// fieldValue returns the single value at a path, false when it is missing.
func fieldValue(obj *unstructured.Unstructured, path string) (any, bool) {
	jp, err := parseFieldPath(path)
	if err != nil {
		return nil, false
	}
	results, err := jp.FindResults(obj.Object)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil, false
	}
	return results[0][0].Interface(), true
}
