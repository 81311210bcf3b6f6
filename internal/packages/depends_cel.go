package packages

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"k8s.io/utils/lru"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/regexcost"
)

// Bounds of a readyExpr (spec.dependsOn[].readyExpr). The schema bounds its length (1024); the
// cost limit bounds the work of one evaluation, in cel-go's cost units (roughly one per
// operation and per list or map element visited), far below what a dependency's status needs
// and far below what would hold a worker; compiled programs are kept in a bounded cache.
const (
	readyExprCostLimit = 100_000
	readyExprNesting   = 32
	readyExprPrograms  = 512
)

// readyExprs compiles and evaluates readyExprs, keeping compiled programs by expression.
type readyExprs struct {
	once     sync.Once
	env      *cel.Env
	envErr   error
	programs *lru.Cache
}

func newReadyExprs() *readyExprs { return &readyExprs{programs: lru.New(readyExprPrograms)} }

func (r *readyExprs) program(expr string) (cel.Program, error) {
	r.once.Do(func() {
		// matches is priced before it runs: cel-go's own counts its cost only after the call.
		r.env, r.envErr = regexcost.NewCELEnv(
			cel.ParserExpressionSizeLimit(1024),
			cel.ParserRecursionLimit(readyExprNesting),
			cel.Variable("dep", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("self", cel.MapType(cel.StringType, cel.DynType)),
		)
	})
	if r.envErr != nil {
		return nil, fmt.Errorf("build CEL environment: %w", r.envErr)
	}
	if p, ok := r.programs.Get(expr); ok {
		return p.(cel.Program), nil
	}
	ast, iss := r.env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("gives %s, not a bool", ast.OutputType())
	}
	p, err := r.env.Program(ast, append(regexcost.CELProgramOptions(), cel.CostLimit(readyExprCostLimit), cel.InterruptCheckFrequency(100))...)
	if err != nil {
		return nil, err
	}
	r.programs.Add(expr, p)
	return p, nil
}

// eval evaluates expr with dep and self bound to the view celView gives of them. A field the
// status does not have (yet) is an error in CEL ("no such key"): it counts as not ready, not
// as an invalid expression, since the dependency may write it later; write has(dep.status.x)
// to tell the two apart. Any other error is reported by its class (evalErrorClass).
func (r *readyExprs) eval(ctx context.Context, expr string, dep, self packageObject) (bool, error) {
	p, err := r.program(expr)
	if err != nil {
		return false, err
	}
	out, _, err := p.ContextEval(ctx, map[string]any{"dep": celView(dep), "self": celView(self)})
	switch {
	case err != nil && ctx.Err() != nil:
		return false, fmt.Errorf("stopped: %w", ctx.Err())
	case err != nil && strings.Contains(err.Error(), "no such key"):
		return false, nil
	case err != nil:
		return false, errors.New(evalErrorClass(err))
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("gives %T, not a bool", out.Value())
	}
	return b, nil
}

// evalErrorClasses are the runtime errors a readyExpr is told by name. cel-go's messages quote
// the values they failed on (a timestamp it could not parse, a string it could not convert, a
// pattern that did not compile), and the message goes into the tenant's own condition: the
// class is said, the values never. The messages of matches (regexcost) name sizes only.
var evalErrorClasses = []struct{ match, class string }{
	{"actual cost limit exceeded", fmt.Sprintf("over its cost limit of %d", readyExprCostLimit)},
	{"matches: ", ""}, // regexcost's own messages: sizes, never values
	{"no such overload", "no such overload (a function or operator applied to values of the wrong type)"},
	{"no matching overload", "no such overload (a function or operator applied to values of the wrong type)"},
	{"division by zero", "division by zero"},
	{"modulus by zero", "modulus by zero"},
	{"overflow", "integer overflow"},
	{"index out of range", "index out of range"},
	{"timestamp", "invalid timestamp"},
	{"duration", "invalid duration"},
}

// evalErrorClass is what a failed evaluation reports: the class of its error, not its values.
func evalErrorClass(err error) string {
	msg := err.Error()
	for _, c := range evalErrorClasses {
		if i := strings.Index(msg, c.match); i >= 0 {
			if c.class == "" {
				return msg[i:]
			}
			return "evaluation failed: " + c.class
		}
	}
	return "evaluation failed (a conversion or another runtime error; its values are not shown)"
}

// celView is what a readyExpr sees of an installation, an allow-list: apiVersion, kind, the
// name, namespace, generation and labels, the annotations of celViewAnnotations only, and of the
// status the observed generation, the conditions without their messages and the applied
// revision, tag and version. The rest is left out on purpose: the spec and kubectl's
// last-applied annotation hold a ClusterPackage's configuration, condition messages can quote
// it, and lastAppliedConfigDigest, a plain digest of it, lets a low-entropy configuration be
// guessed offline. The view is the same for dep and self, so that one rule tells what an
// expression sees.
func celView(obj packageObject) map[string]any {
	kind := v1alpha1.PackageKind
	if _, cluster := obj.(*v1alpha1.ClusterPackage); cluster {
		kind = v1alpha1.ClusterPackageKind
	}
	metadata := map[string]any{"name": obj.GetName(), "generation": obj.GetGeneration()}
	if obj.GetNamespace() != "" {
		metadata["namespace"] = obj.GetNamespace()
	}
	if l := obj.GetLabels(); l != nil {
		metadata["labels"] = stringMap(l)
	}
	annotations := map[string]any{}
	for _, k := range celViewAnnotations {
		if v, ok := obj.GetAnnotations()[k]; ok {
			annotations[k] = v
		}
	}
	metadata["annotations"] = annotations
	st := obj.GetStatus()
	conditions := make([]any, 0, len(st.Conditions))
	for _, c := range st.Conditions {
		conditions = append(conditions, map[string]any{
			"type": c.Type, "status": string(c.Status), "reason": c.Reason,
			"observedGeneration": c.ObservedGeneration, "lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		})
	}
	status := map[string]any{"observedGeneration": st.ObservedGeneration, "conditions": conditions}
	for k, v := range map[string]string{
		"lastAppliedRevision": st.LastAppliedRevision,
		"lastAppliedTag":      st.LastAppliedTag,
		"lastAppliedVersion":  st.LastAppliedVersion,
	} {
		if v != "" {
			status[k] = v
		}
	}
	return map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": kind, "metadata": metadata, "status": status}
}

// celViewAnnotations are the annotations a readyExpr sees: pkgsync's own that say where an
// installation stands in a fleet. Not every pkgsync.dev/ key: pkgsync.dev/desired-hash, on an
// installation pkgsync applied itself, is a digest of the whole object, configuration included.
var celViewAnnotations = []string{v1alpha1.HoldAnnotation, v1alpha1.FleetRevisionAnnotation, v1alpha1.FleetRevisionTimeAnnotation}

func stringMap(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
