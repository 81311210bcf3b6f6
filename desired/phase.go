package desired

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Phase is one step of a rollout: its objects are applied together to the cluster its class
// names, and the next phase starts only when all of them are available.
type Phase struct {
	// Name of the phase, from the manifest.
	Name string
	// Class is "" for the management cluster or "hosted-cluster" (v1alpha1.ClassHostedCluster).
	Class string
	// Objects in the order they were found: files sorted by path, documents in file order.
	Objects []*unstructured.Unstructured
}
