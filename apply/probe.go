package apply

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/jsonpath"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/regexcost"
)

// celCostLimit bounds the work of one CEL probe evaluation, so that a package cannot stall the
// reconciler with an expensive rule.
const celCostLimit = 1_000_000

// probeSet is the compiled form of a manifest's availability probes.
type probeSet []compiledProbe

type compiledProbe struct {
	kind   *v1alpha1.GroupKindSelector
	labels labels.Selector
	checks []check
}

// check returns "" when the object passes, or why it does not.
type check func(ctx context.Context, obj *unstructured.Unstructured) (string, error)

// celCache compiles each CEL rule once; programs are safe for concurrent use.
type celCache struct {
	mu       sync.Mutex
	env      *cel.Env
	programs map[string]cel.Program
}

func (c *celCache) program(rule string) (cel.Program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.programs[rule]; ok {
		return p, nil
	}
	if c.env == nil {
		// matches is priced before it runs: cel-go's own counts its cost only after the call,
		// and the objects probed are written by whoever writes their namespace.
		env, err := regexcost.NewCELEnv(cel.Variable("self", cel.DynType))
		if err != nil {
			return nil, fmt.Errorf("create CEL environment: %w", err)
		}
		c.env = env
		c.programs = map[string]cel.Program{}
	}
	ast, iss := c.env.Compile(rule)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("rule yields %s, want bool", t)
	}
	p, err := c.env.Program(ast, append(regexcost.CELProgramOptions(), cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))...)
	if err != nil {
		return nil, err
	}
	c.programs[rule] = p
	return p, nil
}

// compileProbes turns manifest probes into checks; an invalid probe is an error of the package.
func compileProbes(probes []v1alpha1.AvailabilityProbe, cache *celCache) (probeSet, error) {
	set := make(probeSet, 0, len(probes))
	for i, p := range probes {
		cp := compiledProbe{kind: p.Selector.Kind, labels: labels.Everything()}
		if p.Selector.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(p.Selector.Selector)
			if err != nil {
				return nil, fmt.Errorf("availability probe %d: label selector: %w", i, err)
			}
			cp.labels = sel
		}
		for j, pr := range p.Probes {
			c, err := compileCheck(pr, cache)
			if err != nil {
				return nil, fmt.Errorf("availability probe %d, probe %d: %w", i, j, err)
			}
			cp.checks = append(cp.checks, c)
		}
		set = append(set, cp)
	}
	return set, nil
}

func compileCheck(p v1alpha1.Probe, cache *celCache) (check, error) {
	switch {
	case p.Condition != nil:
		return conditionCheck(*p.Condition), nil
	case p.FieldsEqual != nil:
		for _, f := range []string{p.FieldsEqual.FieldA, p.FieldsEqual.FieldB} {
			if _, err := parseFieldPath(f); err != nil {
				return nil, err
			}
		}
		return fieldsEqualCheck(*p.FieldsEqual), nil
	case p.CEL != nil:
		prg, err := cache.program(p.CEL.Rule)
		if err != nil {
			return nil, fmt.Errorf("cel rule %q: %w", p.CEL.Rule, err)
		}
		return celCheck(prg, p.CEL.Message), nil
	}
	return nil, fmt.Errorf("probe sets none of condition, fieldsEqual, cel")
}

// evaluate returns the reasons the object fails the probes that select it, none when it passes.
func (s probeSet) evaluate(ctx context.Context, obj *unstructured.Unstructured) ([]string, error) {
	var reasons []string
	for _, p := range s {
		if !p.selects(obj) {
			continue
		}
		for _, c := range p.checks {
			reason, err := c(ctx, obj)
			if err != nil {
				return nil, err
			}
			if reason != "" {
				reasons = append(reasons, reason)
			}
		}
	}
	return reasons, nil
}

func (p compiledProbe) selects(obj *unstructured.Unstructured) bool {
	if p.kind != nil {
		gvk := obj.GroupVersionKind()
		if gvk.Group != p.kind.Group || gvk.Kind != p.kind.Kind {
			return false
		}
	}
	return p.labels.Matches(labels.Set(obj.GetLabels()))
}

func conditionCheck(want v1alpha1.ConditionProbe) check {
	return func(_ context.Context, obj *unstructured.Unstructured) (string, error) {
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conditions {
			cond, ok := c.(map[string]any)
			if !ok || cond["type"] != want.Type {
				continue
			}
			if cond["status"] != want.Status {
				return fmt.Sprintf("%s=%v, want %s", want.Type, cond["status"], want.Status), nil
			}
			if og, ok := cond["observedGeneration"].(int64); ok && og != obj.GetGeneration() {
				return fmt.Sprintf("%s=%s is from generation %d, object is at %d", want.Type, want.Status, og, obj.GetGeneration()), nil
			}
			return "", nil
		}
		return fmt.Sprintf("condition %s not reported", want.Type), nil
	}
}

func fieldsEqualCheck(p v1alpha1.FieldsEqualProbe) check {
	return func(_ context.Context, obj *unstructured.Unstructured) (string, error) {
		a, okA := fieldValue(obj, p.FieldA)
		b, okB := fieldValue(obj, p.FieldB)
		switch {
		case !okA:
			return fmt.Sprintf("probe: %s not set", p.FieldA), nil
		case !okB:
			return fmt.Sprintf("probe: %s not set", p.FieldB), nil
		case !subset(a, b) || !subset(b, a):
			return fmt.Sprintf("probe: %s (%v) != %s (%v)", p.FieldA, a, p.FieldB, b), nil
		}
		return "", nil
	}
}

func celCheck(prg cel.Program, message string) check {
	return func(ctx context.Context, obj *unstructured.Unstructured) (string, error) {
		out, _, err := prg.ContextEval(ctx, map[string]any{"self": obj.Object})
		if err != nil {
			// A rule that fails on this object (a missing field, say) is not satisfied yet.
			return fmt.Sprintf("cel: %s (%v)", message, err), nil
		}
		if out != types.True {
			return "cel: " + message, nil
		}
		return "", nil
	}
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
