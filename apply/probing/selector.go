package probing

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Selector applies Prober to the objects it selects: of Kind's group and kind when Kind is set,
// and matching Labels when Labels is set (both when both are). An object it does not select
// passes.
type Selector struct {
	Kind   *v1alpha1.GroupKindSelector
	Labels labels.Selector
	Prober Prober
}

// Probe implements Prober.
func (s Selector) Probe(ctx context.Context, obj *unstructured.Unstructured) ([]string, error) {
	if !s.selects(obj) {
		return nil, nil
	}
	return s.Prober.Probe(ctx, obj)
}

func (s Selector) selects(obj *unstructured.Unstructured) bool {
	if s.Kind != nil {
		gvk := obj.GroupVersionKind()
		if gvk.Group != s.Kind.Group || gvk.Kind != s.Kind.Kind {
			return false
		}
	}
	return s.Labels == nil || s.Labels.Matches(labels.Set(obj.GetLabels()))
}
