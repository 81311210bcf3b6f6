package schema

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// removeField reads paths that structured-merge-diff writes, with values from the object: any
// string must leave it without a panic, and a path it finds is gone after.
func FuzzRemoveField(f *testing.F) {
	for _, p := range []string{
		`.spec.replica`, `.spec.template.spec.containers[name="a"].imagePullPolice`,
		`.spec.ports[port=80,protocol="TCP"].nme`, `.spec.finalizers[="x"]`, `.items[0].a`,
		`.a.b.c`, `[`, `.x["]`, `.x[name="a\"]"].y`, `.data.a.b`,
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		obj := map[string]any{
			"spec": map[string]any{
				"replica":    int64(3),
				"containers": []any{map[string]any{"name": "a", "x": "y"}, map[string]any{"name": `a"]`, "y": true}},
				"ports":      []any{map[string]any{"port": int64(80), "protocol": "TCP", "nme": "z"}},
				"finalizers": []any{"x"},
			},
			"data":  map[string]any{"a.b": "c"},
			"items": []any{map[string]any{"a": int64(1)}},
		}
		if removeField(obj, path) {
			_, still := valueAt(obj, path)
			assert.False(t, still, path)
		}
	})
}
