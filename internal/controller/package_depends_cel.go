package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/lru"

	"pkgsync.dev/pkgsync/api/v1alpha1"
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
		r.env, r.envErr = cel.NewEnv(
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
	p, err := r.env.Program(ast, cel.CostLimit(readyExprCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	r.programs.Add(expr, p)
	return p, nil
}

// eval evaluates expr with dep and self bound to the view celView gives of them. A field the
// status does not have (yet) is an error in CEL ("no such key"): it counts as not ready, not
// as an invalid expression, since the dependency may write it later; write has(dep.status.x)
// to tell the two apart.
func (r *readyExprs) eval(ctx context.Context, expr string, dep, self packageObject) (bool, error) {
	p, err := r.program(expr)
	if err != nil {
		return false, err
	}
	depView, err := celView(dep)
	if err != nil {
		return false, err
	}
	selfView, err := celView(self)
	if err != nil {
		return false, err
	}
	out, _, err := p.ContextEval(ctx, map[string]any{"dep": depView, "self": selfView})
	switch {
	case err != nil && ctx.Err() != nil:
		return false, fmt.Errorf("stopped: %w", ctx.Err())
	case err != nil && strings.Contains(err.Error(), "no such key"):
		return false, nil
	case err != nil:
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("gives %T, not a bool", out.Value())
	}
	return b, nil
}

// celView is what a readyExpr sees of an installation: apiVersion, kind, the identifying part of
// metadata and the status without the inventory and history (large, and no business of
// another installation). The spec is left out: its config may hold what a tenant's Package
// should not read of a ClusterPackage.
func celView(obj packageObject) (map[string]any, error) {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj.GetStatus())
	if err != nil {
		return nil, fmt.Errorf("convert status: %w", err)
	}
	delete(status, "inventory")
	delete(status, "history")
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
	if a := obj.GetAnnotations(); a != nil {
		metadata["annotations"] = stringMap(a)
	}
	return map[string]any{"apiVersion": "pkgsync.dev/v1alpha1", "kind": kind, "metadata": metadata, "status": status}, nil
}

func stringMap(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
