package probing

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/internal/regexcost"
)

// celCostLimit bounds the work of one CEL probe evaluation, so that a package cannot stall the
// reconciler with an expensive rule.
const celCostLimit = 1_000_000

// CEL passes when its rule, with the object bound as self, yields true. A rule that fails on an
// object (a missing field, say) does not pass, with the error in the reason.
type CEL struct {
	program cel.Program
	message string
}

// NewCEL compiles rule through cache; message explains a failing rule to the user.
func NewCEL(rule, message string, cache *CELCache) (CEL, error) {
	prg, err := cache.program(rule)
	if err != nil {
		return CEL{}, fmt.Errorf("cel rule %q: %w", rule, err)
	}
	return CEL{program: prg, message: message}, nil
}

// Probe implements Prober.
func (c CEL) Probe(ctx context.Context, obj *unstructured.Unstructured) ([]string, error) {
	out, _, err := c.program.ContextEval(ctx, map[string]any{"self": obj.Object})
	if err != nil {
		// A rule that fails on this object (a missing field, say) is not satisfied yet.
		return []string{fmt.Sprintf("cel: %s (%v)", c.message, err)}, nil
	}
	if out != types.True {
		return []string{"cel: " + c.message}, nil
	}
	return nil, nil
}

// CELCache compiles each CEL rule once; programs are safe for concurrent use. The zero value is
// ready to use.
type CELCache struct {
	mu       sync.Mutex
	env      *cel.Env
	programs map[string]cel.Program
}

func (c *CELCache) program(rule string) (cel.Program, error) {
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
