package apply_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The engine takes desired.Phase and never imports render: a user of the engine does not pull
// in templating and kustomize (docs/architecture.md).
func TestApplyImportsNeitherRenderNorKustomize(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "pkgsync.dev/pkgsync/apply").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		assert.NotEqual(t, "pkgsync.dev/pkgsync/render", dep)
		assert.NotContains(t, dep, "kustomize", "apply depends on %s", dep)
		assert.NotContains(t, dep, "sprig", "apply depends on %s", dep)
	}
}
