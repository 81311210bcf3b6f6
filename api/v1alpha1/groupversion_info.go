package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every pkgsync API type.
	GroupVersion = schema.GroupVersion{Group: "pkgsync.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the custom resources with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the custom resources of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
