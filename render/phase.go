package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// Phase is one step of a rollout: its objects are applied together to the cluster its class
// names, and the next phase starts only when all of them are available.
type Phase struct {
	// Name of the phase, from the manifest.
	Name string
	// Class is "" for the management cluster or v1alpha1.ClassHostedCluster.
	Class string
	// Objects in the order they were found: files sorted by path, documents in file order.
	Objects []*unstructured.Unstructured
}

// Result is a rendered package.
type Result struct {
	// Manifest is the package's manifest, converted to pkgsync's own format when the package
	// was written for Package Operator.
	Manifest *v1alpha1.PackageManifest
	// Phases in rollout order, every phase of the manifest present even when empty.
	Phases []Phase
	// Config is the configuration after pruning and defaulting.
	Config map[string]any
}
