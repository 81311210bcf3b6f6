package analysis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/utils/lru"

	"pkgsync.dev/pkgsync/internal/regexcost"
)

// cel evaluates a CEL check for each subject; a subject it is false for has failed. A field the
// member's status does not have yet ("no such key") fails it too: the soak waits for it.
func (e *Evaluator) cel(ctx context.Context, expr string, subjects []Subject) (map[string]string, error) {
	p, err := e.program(expr)
	if err != nil {
		return nil, fmt.Errorf("cel: %w", err)
	}
	failed := map[string]string{}
	for _, s := range subjects {
		out, _, err := p.ContextEval(ctx, map[string]any{"member": memberView(s), "cluster": clusterView(s)})
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("cel: stopped: %w", ctx.Err())
		case err != nil && strings.Contains(err.Error(), "no such key"):
			failed[s.Namespace] = "false (a field it reads is not there yet)"
		case err != nil && strings.Contains(err.Error(), "cost limit"):
			return nil, fmt.Errorf("cel: over its cost limit of %d", celCostLimit)
		case err != nil:
			return nil, fmt.Errorf("cel: %w", err)
		default:
			if b, ok := out.Value().(bool); !ok {
				return nil, fmt.Errorf("cel: gives %T, not a bool", out.Value())
			} else if !b {
				failed[s.Namespace] = "false"
			}
		}
	}
	return failed, nil
}

func (e *Evaluator) program(expr string) (cel.Program, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.once.Do(func() {
		e.programs = lru.New(celPrograms)
		// matches is priced before it runs (regexcost): cel-go counts its cost only after the call.
		e.env, e.envErr = regexcost.NewCELEnv(
			cel.ParserExpressionSizeLimit(1024),
			cel.ParserRecursionLimit(celNesting),
			cel.Variable("member", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("cluster", cel.MapType(cel.StringType, cel.DynType)),
		)
	})
	if e.envErr != nil {
		return nil, fmt.Errorf("build CEL environment: %w", e.envErr)
	}
	if p, ok := e.programs.Get(expr); ok {
		return p.(cel.Program), nil
	}
	ast, iss := e.env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, errors.New("gives " + ast.OutputType().String() + ", not a bool")
	}
	p, err := e.env.Program(ast, append(regexcost.CELProgramOptions(), cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))...)
	if err != nil {
		return nil, err
	}
	e.programs.Add(expr, p)
	return p, nil
}

// memberView is what a check sees of a member: the fleet's own object (the fleet's author is
// the platform team, who wrote the member's spec), its metadata and the status the member's
// controller reports.
func memberView(s Subject) map[string]any {
	metadata := map[string]any{"namespace": s.Namespace}
	status := map[string]any{}
	if p := s.Pkg; p != nil {
		metadata["name"] = p.Name
		metadata["labels"] = anyMap(p.Labels)
		metadata["annotations"] = anyMap(p.Annotations)
		conditions := make([]any, 0, len(p.Status.Conditions))
		for _, c := range p.Status.Conditions {
			conditions = append(conditions, map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
				"observedGeneration": c.ObservedGeneration})
		}
		status["observedGeneration"] = p.Status.ObservedGeneration
		status["conditions"] = conditions
		status["lastAppliedRevision"] = p.Status.LastAppliedRevision
		status["lastAppliedVersion"] = p.Status.LastAppliedVersion
	}
	return map[string]any{"metadata": metadata, "status": status}
}

func clusterView(s Subject) map[string]any {
	hc := s.Cluster
	if hc == nil {
		return map[string]any{}
	}
	return map[string]any{"name": hc.Name, "namespace": hc.Namespace, "labels": anyMap(hc.Labels), "annotations": anyMap(hc.Annotations),
		"available": hc.Available}
}

func anyMap(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
