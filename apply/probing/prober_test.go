package probing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func deploymentWith(replicas, updated int64, conditionStatus string, condGen int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": "web", "namespace": "ns", "generation": int64(2), "labels": map[string]any{"app": "web"}},
		"spec":       map[string]any{"replicas": replicas},
		"status": map[string]any{
			"updatedReplicas": updated,
			"conditions": []any{
				map[string]any{"type": "Available", "status": conditionStatus, "observedGeneration": condGen},
			},
		},
	}}
}

func TestProbes(t *testing.T) {
	t.Parallel()
	deployments := v1alpha1.ProbeSelector{Kind: &v1alpha1.GroupKindSelector{Group: "apps", Kind: "Deployment"}}
	tests := []struct {
		name   string
		probes []v1alpha1.AvailabilityProbe
		obj    *unstructured.Unstructured
		want   []string
	}{{
		name:   "condition passes",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{Condition: &v1alpha1.ConditionProbe{Type: "Available", Status: "True"}}}}},
		obj:    deploymentWith(2, 2, "True", 2),
	}, {
		name:   "condition has the wrong status",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{Condition: &v1alpha1.ConditionProbe{Type: "Available", Status: "True"}}}}},
		obj:    deploymentWith(2, 2, "False", 2),
		want:   []string{"Available=False, want True"},
	}, {
		name:   "condition from an older generation",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{Condition: &v1alpha1.ConditionProbe{Type: "Available", Status: "True"}}}}},
		obj:    deploymentWith(2, 2, "True", 1),
		want:   []string{"Available=True is from generation 1, object is at 2"},
	}, {
		name:   "condition missing",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{Condition: &v1alpha1.ConditionProbe{Type: "Ready", Status: "True"}}}}},
		obj:    deploymentWith(2, 2, "True", 2),
		want:   []string{"condition Ready not reported"},
	}, {
		name:   "fields equal",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{FieldsEqual: &v1alpha1.FieldsEqualProbe{FieldA: ".spec.replicas", FieldB: ".status.updatedReplicas"}}}}},
		obj:    deploymentWith(2, 2, "True", 2),
	}, {
		name:   "fields differ",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{FieldsEqual: &v1alpha1.FieldsEqualProbe{FieldA: ".spec.replicas", FieldB: ".status.updatedReplicas"}}}}},
		obj:    deploymentWith(2, 0, "True", 2),
		want:   []string{"probe: .spec.replicas (2) != .status.updatedReplicas (0)"},
	}, {
		name:   "field missing",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{FieldsEqual: &v1alpha1.FieldsEqualProbe{FieldA: ".spec.replicas", FieldB: ".status.readyReplicas"}}}}},
		obj:    deploymentWith(2, 2, "True", 2),
		want:   []string{"probe: .status.readyReplicas not set"},
	}, {
		name:   "cel passes",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{CEL: &v1alpha1.CELProbe{Rule: "self.status.updatedReplicas == self.spec.replicas", Message: "not rolled out"}}}}},
		obj:    deploymentWith(3, 3, "True", 2),
	}, {
		name:   "cel fails with the probe's message",
		probes: []v1alpha1.AvailabilityProbe{{Selector: deployments, Probes: []v1alpha1.Probe{{CEL: &v1alpha1.CELProbe{Rule: "self.status.updatedReplicas == self.spec.replicas", Message: "not rolled out"}}}}},
		obj:    deploymentWith(3, 1, "True", 2),
		want:   []string{"cel: not rolled out"},
	}, {
		name:   "label selector not matching skips the probe",
		probes: []v1alpha1.AvailabilityProbe{{Selector: v1alpha1.ProbeSelector{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}, Probes: []v1alpha1.Probe{{CEL: &v1alpha1.CELProbe{Rule: "false", Message: "never"}}}}},
		obj:    deploymentWith(2, 0, "False", 2),
	}, {
		name:   "label selector matching applies the probe",
		probes: []v1alpha1.AvailabilityProbe{{Selector: v1alpha1.ProbeSelector{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}, Probes: []v1alpha1.Probe{{CEL: &v1alpha1.CELProbe{Rule: "false", Message: "never"}}}}},
		obj:    deploymentWith(2, 0, "False", 2),
		want:   []string{"cel: never"},
	}, {
		name:   "kind selector not matching skips the probe",
		probes: []v1alpha1.AvailabilityProbe{{Selector: v1alpha1.ProbeSelector{Kind: &v1alpha1.GroupKindSelector{Kind: "Deployment"}}, Probes: []v1alpha1.Probe{{CEL: &v1alpha1.CELProbe{Rule: "false", Message: "never"}}}}},
		obj:    deploymentWith(2, 0, "False", 2),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prober, err := Compile(tt.probes, &CELCache{})
			require.NoError(t, err)
			got, err := prober.Probe(t.Context(), tt.obj)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCompileProbesRejectsInvalidProbes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		probe v1alpha1.Probe
		want  string
	}{
		{"cel syntax", v1alpha1.Probe{CEL: &v1alpha1.CELProbe{Rule: "self.status ==", Message: "m"}}, "cel rule"},
		{"cel not bool", v1alpha1.Probe{CEL: &v1alpha1.CELProbe{Rule: "'text'", Message: "m"}}, "want bool"},
		{"field path", v1alpha1.Probe{FieldsEqual: &v1alpha1.FieldsEqualProbe{FieldA: ".spec[", FieldB: ".x"}}, "field path"},
		{"empty probe", v1alpha1.Probe{}, "sets none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile([]v1alpha1.AvailabilityProbe{{Probes: []v1alpha1.Probe{tt.probe}}}, &CELCache{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
