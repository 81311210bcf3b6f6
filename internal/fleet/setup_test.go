package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func TestFleetGateChanged(t *testing.T) {
	t.Parallel()
	cluster := func(change func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Available", "status": "True"},
		}}}}
		u.SetAnnotations(map[string]string{"other": "x"})
		if change != nil {
			change(u)
		}
		return u
	}
	tests := []struct {
		name   string
		change func(*unstructured.Unstructured)
		wakes  bool
	}{
		{"nothing the fleet reads", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"other": "y"}) }, false},
		{"held", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{v1alpha1.HoldAnnotation: ""}) }, true},
		{"maintenance windows", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"other": "x", v1alpha1.MaintenanceWindowsAnnotation: `[{"schedule":"@daily","duration":"1h"}]`})
		}, true},
		{"not Available", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Available", "status": "False"}}, "status", "conditions")
		}, true},
		{"paused", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "true", "spec", "pausedUntil")
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.wakes, fleetGateChanged(event.UpdateEvent{ObjectOld: cluster(nil), ObjectNew: cluster(tt.change)}))
		})
	}
	holding := func(why string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{v1alpha1.HoldAnnotation: why}) }
	}
	assert.True(t, fleetGateChanged(event.UpdateEvent{ObjectOld: cluster(holding("freeze")), ObjectNew: cluster(holding("another reason"))}), "a new reason is shown")
	assert.True(t, fleetGateChanged(event.UpdateEvent{ObjectOld: cluster(holding("freeze")), ObjectNew: cluster(nil)}), "released")
	windows := func(value string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{v1alpha1.MaintenanceWindowsAnnotation: value})
		}
	}
	assert.True(t, fleetGateChanged(event.UpdateEvent{ObjectOld: cluster(windows("[]")), ObjectNew: cluster(windows(`[{"schedule":"@daily","duration":"1h"}]`))}), "other windows")
	assert.True(t, fleetGateChanged(event.UpdateEvent{ObjectOld: cluster(windows("[]")), ObjectNew: cluster(nil)}), "windows removed")
}
