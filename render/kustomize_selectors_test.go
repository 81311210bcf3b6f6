package render

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 41, on a second read: kustomize compiles a patch's target selector as regular
// expressions and matches every resource against them, with no context: a 3.9 KB selector took
// 2.8 s, five took 15.7 s past a 100 ms render deadline. Selectors are checked by regexcost's
// rules before kustomize runs.
func TestKustomizeSelectorsAreBounded(t *testing.T) {
	t.Parallel()
	expanding := `(abcdefgh){500}`
	for name, kustomization := range map[string]string{
		"patch target name":       "resources: [local.yaml]\npatches:\n- path: patch.yaml\n  target: {kind: ConfigMap, name: '" + expanding + "'}\n",
		"patch target kind":       "resources: [local.yaml]\npatches:\n- path: patch.yaml\n  target: {kind: '" + expanding + "'}\n",
		"replacement target":      "resources: [local.yaml]\nreplacements:\n- source: {kind: ConfigMap, name: local, fieldPath: metadata.name}\n  targets:\n  - select: {namespace: '" + expanding + "'}\n    fieldPaths: [data.x]\n",
		"together over the limit": "resources: [local.yaml]\npatches:\n" + strings.Repeat("- path: patch.yaml\n  target: {name: '(abcdefgh){50}'}\n", 20),
		"folded wide class":       "resources: [local.yaml]\npatches:\n- path: patch.yaml\n  target: {name: '(?i)" + strings.Repeat(`[B-\x{1E942}]`, 100) + "'}\n",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := Render(ctx, kustomizePackage(kustomization, nil), Options{})
		cancel()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "one/kustomization.yaml", name)
		assert.Contains(t, err.Error(), "over the", name)
		assert.NotContains(t, err.Error(), "stopped", "%s: refused before kustomize runs", name)
	}
	// Selectors as they are written still work.
	res, err := Render(t.Context(), kustomizePackage("resources: [local.yaml]\npatches:\n- path: patch.yaml\n  target: {kind: ConfigMap, name: 'loc.*'}\n", nil), Options{})
	require.NoError(t, err)
	require.Len(t, res.Phases[0].Objects, 1)
	assert.Equal(t, "yes", res.Phases[0].Objects[0].Object["data"].(map[string]any)["patched"])
}
