package probing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Issue 41: a package's CEL probe matches a field of the object it probes, which whoever
// writes the object's namespace may set, against itself. Go's regexp cannot be interrupted and
// cel-go counted the cost of matches only after the call; the call is now priced before it runs.
func TestProbeMatchesIsPricedBeforeItRuns(t *testing.T) {
	t.Parallel()
	obj := deploymentWith(1, 1, "True", 2)
	obj.SetAnnotations(map[string]string{"a": strings.Repeat("x?", 32<<10) + "y"})
	prober, err := Compile([]v1alpha1.AvailabilityProbe{{Probes: []v1alpha1.Probe{{CEL: &v1alpha1.CELProbe{
		Rule: "self.metadata.annotations['a'].matches(self.metadata.annotations['a'])", Message: "matches itself",
	}}}}}, &CELCache{})
	require.NoError(t, err)
	// A deadline far above the bound of one evaluation: before the fix, the regexp ran past it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reasons, err := prober.Probe(ctx, obj)
	require.NoError(t, err)
	require.Len(t, reasons, 1)
	assert.Contains(t, reasons[0], "regular expression over the size limits")
	assert.NoError(t, ctx.Err(), "refused before it runs, not stopped by the deadline")
	assert.NotContains(t, reasons[0], "x?x?")
}

func TestCELProgramsAreCompiledOnce(t *testing.T) {
	t.Parallel()
	cache := &CELCache{}
	a, err := cache.program("self.x == 1")
	require.NoError(t, err)
	b, err := cache.program("self.x == 1")
	require.NoError(t, err)
	assert.Same(t, a, b)
}
