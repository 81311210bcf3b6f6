package desired

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Phase is one step of an apply pass: its objects are applied together to the cluster its class
// names, and the next phase starts only when all of them are available.
type Phase struct {
	// Name of the phase, from the manifest.
	Name string
	// Class is "" for the management cluster or "hosted-cluster" (v1alpha1.ClassHostedCluster).
	Class string
	// Objects in the order they were found: files sorted by path, documents in file order.
	Objects []*unstructured.Unstructured
	// ConditionMappings copy conditions of the phase's objects into the status of their owner.
	ConditionMappings []ConditionMapping
}

// ConditionMapping reports a condition of an applied object in the status of the resource that
// owns it, under another type (Package Operator's package-operator.run/condition-map).
type ConditionMapping struct {
	// Object is the index of the object in Phase.Objects.
	Object int
	// Source is the condition type in the object's status.conditions.
	Source string
	// Destination is the condition type in the owner's status; it has a domain prefix
	// (example.com/Available), so it never collides with the owner's own conditions.
	Destination string
}
