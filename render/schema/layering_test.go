package schema_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The checker is a leaf: render imports it, so it imports no package of pkgsync (doc.go).
func TestSchemaImportsNoPkgsyncPackage(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "pkgsync.dev/pkgsync/render/schema").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		if dep != "pkgsync.dev/pkgsync/render/schema" {
			assert.NotContains(t, dep, "pkgsync.dev/pkgsync", "render/schema depends on %s", dep)
		}
	}
}
