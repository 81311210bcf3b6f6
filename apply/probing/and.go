package probing

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// And passes when every member passes. The reasons are those of every failing member, in
// order; the first member that cannot be evaluated ends it with its error.
type And []Prober

// Probe implements Prober.
func (a And) Probe(ctx context.Context, obj *unstructured.Unstructured) ([]string, error) {
	var reasons []string
	for _, p := range a {
		r, err := p.Probe(ctx, obj)
		if err != nil {
			return nil, err
		}
		reasons = append(reasons, r...)
	}
	return reasons, nil
}
