package render

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 41: a package's CEL expression matches a configuration string (up to ~1.5 MiB) against
// itself. cel-go counted the cost of matches after the call, and Go's regexp cannot be
// interrupted, so the render deadline did not hold (5–8 s past 100 ms). The call is refused
// before it runs.
func TestCELMatchesIsPricedBeforeItRuns(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x?", 32<<10) + "y" // no literal fast path, no early match
	for _, expr := range []string{
		`config.x.matches(config.x)`,
		`config.x.matches(config.y)`,
		`matches(config.x, config.y)`,
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		c, err := newCELEvaluator(ctx, map[string]any{"config": map[string]any{"x": long, "y": strings.Repeat("(a|b)", 500)}})
		require.NoError(t, err)
		_, err = c.templateFunc(expr)
		cancel()
		require.Error(t, err, expr)
		assert.NotContains(t, err.Error(), "stopped", "%s: refused before it runs, not stopped by the deadline", expr)
		assert.NotContains(t, err.Error(), "x?x?", "%s: the error names no runtime value", expr)
	}
}

// Package Operator's expressions see its render context's top-level keys, dependencies too.
func TestCELSeesDependencies(t *testing.T) {
	t.Parallel()
	c, err := newCELEvaluator(t.Context(), map[string]any{})
	require.NoError(t, err)
	ok, err := c.templateFunc(`size(dependencies) == 0 && size(config) == 0`)
	require.NoError(t, err)
	assert.True(t, ok)
}
