package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every pkgsync API type.
	GroupVersion = schema.GroupVersion{Group: "pkgsync.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the custom resources with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the custom resources of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Package{}, &PackageList{}, &ClusterPackage{}, &ClusterPackageList{},
		&ObjectDeployment{}, &ObjectDeploymentList{}, &ClusterObjectDeployment{}, &ClusterObjectDeploymentList{},
		&HostedClusterPackage{}, &HostedClusterPackageList{},
		&TrustPolicy{}, &TrustPolicyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
