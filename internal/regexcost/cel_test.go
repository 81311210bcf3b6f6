package regexcost

import (
	"context"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func celProgram(t *testing.T, expr string, limit uint64) (cel.Program, error) {
	t.Helper()
	e, err := NewCELEnv(cel.Variable("a", cel.StringType), cel.Variable("b", cel.StringType))
	require.NoError(t, err)
	ast, iss := e.Compile(expr)
	require.NoError(t, iss.Err())
	return e.Program(ast, append(CELProgramOptions(), cel.CostLimit(limit))...)
}

// The attack of issue 41: a 64 KiB string matched against itself as a pattern. cel-go's own
// matches ran it (22 s); here it is refused before it runs, with sizes in the error only.
func TestCELSelfMatchIsRefused(t *testing.T) {
	t.Parallel()
	p, err := celProgram(t, `a.matches(a)`, 100_000)
	require.NoError(t, err)
	secret := strings.Repeat("s3cr3t", 64<<10/6)
	_, _, err = p.ContextEval(context.Background(), map[string]any{"a": secret})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "over the size limits")
	assert.NotContains(t, err.Error(), "s3cr3t")

	// A pattern within the size limits, on the longest string: over the steps of one call.
	p, err = celProgram(t, `a.matches(b)`, 100_000)
	require.NoError(t, err)
	_, _, err = p.ContextEval(context.Background(), map[string]any{"a": secret, "b": strings.Repeat("(s|3)", 100)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too costly")
	assert.NotContains(t, err.Error(), "s3cr3t")
}

// Each call is charged what it was priced at: many calls within one call's bound still stop at
// the cost limit.
func TestCELMatchesCountsAgainstTheCostLimit(t *testing.T) {
	t.Parallel()
	p, err := celProgram(t, `[1,2,3,4,5,6,7,8,9,10].all(i, [1,2,3,4,5,6,7,8,9,10].all(j, !a.matches('(x|y)*z')))`, 100_000)
	require.NoError(t, err)
	_, _, err = p.ContextEval(context.Background(), map[string]any{"a": strings.Repeat("x", 20_000)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cost limit")

	// The same expression on a short string is cheap.
	out, _, err := p.ContextEval(context.Background(), map[string]any{"a": "xxxz"})
	require.NoError(t, err)
	assert.Equal(t, false, out.Value())
}

func TestCELMatchesWorks(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]bool{
		`a.matches('^v[0-9]+$')`:     true,
		`matches(a, 'x')`:            false,
		`b.matches(a)`:               true,
		`'v2'.matches('^v' + '2$')`:  true,
		`!a.matches('^v1$') && true`: true,
		`a.matches('(?i)V[0-9]')`:    true,
		`b.matches('[')`:             false, // never reached: see below
	} {
		if expr == `b.matches('[')` {
			_, err := celProgram(t, expr, 100_000)
			require.Error(t, err, "a constant pattern is checked when the program is created")
			assert.Contains(t, err.Error(), "missing closing ]")
			continue
		}
		p, err := celProgram(t, expr, 100_000)
		require.NoError(t, err, expr)
		out, _, err := p.ContextEval(context.Background(), map[string]any{"a": "v2", "b": "v2"})
		require.NoError(t, err, expr)
		assert.Equal(t, want, out.Value(), expr)
	}
}
