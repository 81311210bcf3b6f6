package regexcost

import (
	"errors"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/env"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// stepsPerCELUnit converts the steps of a matches call into CEL cost units: a CEL unit is about
// one operation of the interpreter, some ten times the work of a matcher step.
const stepsPerCELUnit = 10

// NewCELEnv builds a CEL environment with the standard library whose matches function is
// priced before it runs (the standard one runs whatever it is given), and opts. Programs of
// the environment are created with CELProgramOptions.
func NewCELEnv(opts ...cel.EnvOption) (*cel.Env, error) {
	std := cel.StdLib(cel.StdLibSubset(&env.LibrarySubset{
		ExcludeFunctions: []*env.Function{{Name: overloads.Matches}},
	}))
	matches := cel.Function(overloads.Matches,
		cel.Overload(overloads.Matches, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType),
		cel.MemberOverload(overloads.MatchesString, []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType),
		cel.SingletonBinaryBinding(celMatches))
	return cel.NewCustomEnv(append([]cel.EnvOption{std, cel.EagerlyValidateDeclarations(false), matches}, opts...)...)
}

// CELProgramOptions are the options every program of an environment from NewCELEnv is created
// with: a pattern written as a constant is checked when the program is created (its error
// quotes the expression's own text), and each matches call costs its steps against the
// program's cost limit.
func CELProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.OptimizeRegex(&interpreter.RegexOptimization{
			Function:   overloads.Matches,
			RegexIndex: 1,
			Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
				if _, err := Compile(pattern); err != nil {
					return nil, err
				}
				return call, nil
			},
		}),
		cel.CostTracking(celCost{}),
	}
}

// celMatches is matches(string, pattern). Its errors name the class of the failure and sizes,
// never the pattern or the string: either may be another party's data (an annotation of
// another installation, a configuration value), and the error ends up in a condition.
func celMatches(str, pattern ref.Val) ref.Val {
	s, ok := str.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(str)
	}
	p, ok := pattern.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(pattern)
	}
	re, err := Compile(string(p))
	switch {
	case errors.Is(err, ErrTooLarge):
		return types.NewErr("matches: %s", err) // sizes only
	case err != nil:
		return types.NewErr("matches: invalid regular expression") // regexp's error quotes the pattern
	}
	matched, err := re.MatchString(string(s))
	var cost *CostError
	if errors.As(err, &cost) {
		return types.NewErr("matches: %s", cost.Error())
	}
	return types.Bool(matched)
}

// celCost charges a matches call the steps it was priced at, so that the program's cost limit
// bounds the calls of one evaluation together (each alone is bounded by MaxSteps before it
// runs). Other functions keep CEL's own estimates.
type celCost struct{}

func (celCost) CallCost(function, _ string, args []ref.Val, _ ref.Val) *uint64 {
	if function != overloads.Matches || len(args) != 2 {
		return nil
	}
	s, ok1 := args[0].(types.String)
	p, ok2 := args[1].(types.String)
	if !ok1 || !ok2 {
		return nil
	}
	// A pattern's bytes: its compilation (once, then remembered) is linear in them. A refused
	// call costs nothing more: its error is what the caller sees.
	units := uint64(1 + len(p)/8)
	if re, err := Compile(string(p)); err == nil {
		if steps := re.Steps(string(s)); steps <= MaxSteps {
			units += uint64(steps) / stepsPerCELUnit
		}
	}
	return &units
}
