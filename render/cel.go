package render

import (
	"context"
	"fmt"
	"regexp"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"pkgsync.dev/pkgsync/internal/regexcost"
)

// Bounds of the CEL expressions of a package (filters and the condition annotation), so that a
// package cannot hold up or exhaust the controller with them.
const (
	// celCostLimit bounds the work of one evaluation, in cel-go's cost units (roughly one per
	// operation and per list or map element visited).
	celCostLimit = 1_000_000
	// celMaxExpressionBytes bounds the length of one expression.
	celMaxExpressionBytes = 10_000
	// celMaxNesting bounds how deep an expression may nest.
	celMaxNesting = 64
	// celMaxExpressions bounds the different expressions one render compiles: a template can
	// build expressions in a loop, and each compiled program is kept for the render.
	celMaxExpressions = 1000
)

// conditionNameRE is what a named condition's name must look like: a CEL identifier.
var conditionNameRE = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// celTopLevel are the variables every expression sees: the template context's top-level keys,
// with Package Operator's dependencies (always empty: spec.dependencies is not supported).
var celTopLevel = []string{"package", "config", "images", "environment", "dependencies"}

// celEvaluator evaluates the CEL expressions of one render against its template context and
// the results of the manifest's named conditions, which expressions read as cond.NAME.
type celEvaluator struct {
	ctx      context.Context
	env      *cel.Env
	vars     map[string]any
	programs map[string]cel.Program
	// reads records the variables expressions resolved, for Result.Inputs.
	reads reads
}

// newCELEvaluator prepares the environment; named conditions are added with addCondition.
func newCELEvaluator(ctx context.Context, data map[string]any) (*celEvaluator, error) {
	opts := []cel.EnvOption{
		cel.ParserExpressionSizeLimit(celMaxExpressionBytes),
		cel.ParserRecursionLimit(celMaxNesting),
		cel.Variable("cond", cel.MapType(cel.StringType, cel.BoolType)),
	}
	vars := map[string]any{"cond": map[string]bool{}}
	for _, k := range celTopLevel {
		opts = append(opts, cel.Variable(k, cel.MapType(cel.StringType, cel.DynType)))
		v := data[k]
		if v == nil {
			v = map[string]any{}
		}
		vars[k] = v
	}
	// matches is priced before it runs: cel-go's own counts its cost only after the call.
	env, err := regexcost.NewCELEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("build CEL environment: %w", err)
	}
	return &celEvaluator{ctx: ctx, env: env, vars: vars, programs: map[string]cel.Program{}, reads: reads{}}, nil
}

// addCondition records the result of a named condition for the expressions that follow.
func (c *celEvaluator) addCondition(name string, value bool) {
	c.vars["cond"].(map[string]bool)[name] = value
}

// compile checks an expression once and keeps its program.
func (c *celEvaluator) compile(expr string) (cel.Program, error) {
	if p, ok := c.programs[expr]; ok {
		return p, nil
	}
	if len(c.programs) >= celMaxExpressions {
		return nil, fmt.Errorf("over %d different CEL expressions in one render", celMaxExpressions)
	}
	if len(expr) > celMaxExpressionBytes {
		return nil, fmt.Errorf("expression is %d bytes, over the %d byte limit", len(expr), celMaxExpressionBytes)
	}
	ast, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("must return a bool, not %s", t)
	}
	p, err := c.env.Program(ast, append(regexcost.CELProgramOptions(), cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))...)
	if err != nil {
		return nil, err
	}
	c.programs[expr] = p
	return p, nil
}

// eval evaluates an expression to a bool.
func (c *celEvaluator) eval(expr string) (bool, error) {
	p, err := c.compile(expr)
	if err != nil {
		return false, err
	}
	out, _, err := p.ContextEval(c.ctx, trackedVars{vars: c.vars, reads: c.reads})
	if err != nil {
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			return false, fmt.Errorf("stopped: %w", ctxErr)
		}
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("must return a bool, not %s", out.Type().TypeName())
	}
	return bool(b), nil
}

// trackedVars resolves an expression's variables from vars and records in reads those of the
// template context it resolved (a variable an evaluation does not reach is not read).
type trackedVars struct {
	vars  map[string]any
	reads reads
}

func (t trackedVars) ResolveName(name string) (any, bool) {
	v, ok := t.vars[name]
	if ok && name != "cond" {
		t.reads[name] = true
	}
	return v, ok
}

func (t trackedVars) Parent() interpreter.Activation { return nil }

// templateFunc is the cel template function: {{ cel "EXPRESSION" }} evaluates an expression
// like the condition annotation does, in the template context with the named conditions.
func (c *celEvaluator) templateFunc(expr string) (bool, error) {
	v, err := c.eval(expr)
	if err != nil {
		return false, celError(expr, err)
	}
	return v, nil
}

// celError is a CEL expression that did not compile or evaluate.
func celError(expr string, err error) error {
	return fmt.Errorf("CEL expression %q: %w", shorten(expr), err)
}
