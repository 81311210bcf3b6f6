package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AvailabilityProbe adds availability checks for the objects its selector matches. An object is
// available when kstatus says it is Current and every probe that selects it passes.
type AvailabilityProbe struct {
	// Selector chooses the objects the probes apply to.
	// +required
	Selector ProbeSelector `json:"selector"`

	// Probes must all pass for a selected object to be available.
	// +required
	// +kubebuilder:validation:MinItems=1
	Probes []Probe `json:"probes"`
}

// ProbeSelector selects objects by group and kind, by labels, or both.
type ProbeSelector struct {
	// Kind selects objects of one group and kind.
	// +optional
	Kind *GroupKindSelector `json:"kind,omitempty"`

	// Selector selects objects by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// GroupKindSelector names an API group (empty for the core group) and a kind.
type GroupKindSelector struct {
	// Group is the API group; empty for the core group.
	// +optional
	Group string `json:"group"`

	// Kind is the object kind, for example Deployment.
	// +required
	Kind string `json:"kind"`
}

// Probe is one availability check. Exactly one of its fields is set.
// +kubebuilder:validation:XValidation:rule="(has(self.condition) ? 1 : 0) + (has(self.fieldsEqual) ? 1 : 0) + (has(self.cel) ? 1 : 0) == 1",message="exactly one of condition, fieldsEqual or cel must be set"
type Probe struct {
	// Condition passes when the object has a status condition of the given type and status,
	// observed at the object's current generation when the condition records one.
	// +optional
	Condition *ConditionProbe `json:"condition,omitempty"`

	// FieldsEqual passes when the two fields hold equal values.
	// +optional
	FieldsEqual *FieldsEqualProbe `json:"fieldsEqual,omitempty"`

	// CEL passes when the CEL rule, evaluated with the object as `self`, is true.
	// +optional
	CEL *CELProbe `json:"cel,omitempty"`
}

// ConditionProbe checks a status condition.
type ConditionProbe struct {
	// Type is the condition type, for example Available.
	// +required
	Type string `json:"type"`

	// Status is the expected condition status.
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status string `json:"status"`
}

// FieldsEqualProbe compares two fields of the object, given as JSONPath-like dotted paths
// such as .spec.replicas and .status.readyReplicas.
type FieldsEqualProbe struct {
	// FieldA is the first field path.
	// +required
	FieldA string `json:"fieldA"`

	// FieldB is the second field path.
	// +required
	FieldB string `json:"fieldB"`
}

// CELProbe evaluates a CEL expression against the object.
type CELProbe struct {
	// Rule is a CEL expression that yields a bool; the object is bound to `self`.
	// +required
	Rule string `json:"rule"`

	// Message explains a failing rule to the user.
	// +required
	Message string `json:"message"`
}
