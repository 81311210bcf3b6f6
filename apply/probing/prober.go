package probing

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Prober judges whether an object is available. It returns why not, none when the object
// passes; err is a failure to evaluate the probe at all.
type Prober interface {
	Probe(ctx context.Context, obj *unstructured.Unstructured) (reasons []string, err error)
}

// Compile turns a manifest's probes into one Prober: an And of one Selector per probe, each
// wrapping the And of its checks. An invalid probe is an error of the package.
func Compile(probes []v1alpha1.AvailabilityProbe, cache *CELCache) (Prober, error) {
	all := make(And, 0, len(probes))
	for i, p := range probes {
		sel := Selector{Kind: p.Selector.Kind}
		if p.Selector.Selector != nil {
			labels, err := metav1.LabelSelectorAsSelector(p.Selector.Selector)
			if err != nil {
				return nil, fmt.Errorf("availability probe %d: label selector: %w", i, err)
			}
			sel.Labels = labels
		}
		checks := make(And, 0, len(p.Probes))
		for j, pr := range p.Probes {
			c, err := compileProbe(pr, cache)
			if err != nil {
				return nil, fmt.Errorf("availability probe %d, probe %d: %w", i, j, err)
			}
			checks = append(checks, c)
		}
		sel.Prober = checks
		all = append(all, sel)
	}
	return all, nil
}

func compileProbe(p v1alpha1.Probe, cache *CELCache) (Prober, error) {
	switch {
	case p.Condition != nil:
		return Condition{Type: p.Condition.Type, Status: p.Condition.Status}, nil
	case p.FieldsEqual != nil:
		return NewFieldsEqual(p.FieldsEqual.FieldA, p.FieldsEqual.FieldB)
	case p.CEL != nil:
		return NewCEL(p.CEL.Rule, p.CEL.Message, cache)
	}
	return nil, fmt.Errorf("probe sets none of condition, fieldsEqual, cel")
}
