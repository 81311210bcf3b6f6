package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrustPolicyKind is the kind of an operator's trust policy.
const TrustPolicyKind = "TrustPolicy"

// TrustPolicySpec pins the signers of the images under some repositories, whoever names them.
type TrustPolicySpec struct {
	// Repositories are the repository prefixes the policy covers, REGISTRY[/PATH]:
	// registry.example.com/platform covers registry.example.com/platform and every repository
	// under it (registry.example.com/platform/addons/x), not registry.example.com/platformer; a
	// registry alone covers all its repositories. Images are compared in one spelling, so that
	// another spelling of the same repository is covered too: the registry host in lower case
	// and without a trailing dot; a host without a port (or with :443 or :80) covers the host on
	// every port, a host with another port only that port; docker.io, index.docker.io,
	// registry-1.docker.io and registry.hub.docker.com are one registry, where x and library/x
	// are one repository. A trailing slash is ignored. Hosts are compared by name: the same
	// registry reached by another name or by its IP address is another registry.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?)(:[0-9]{1,5})?(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*/?$`
	// +listType=set
	Repositories []string `json:"repositories"`

	// Verify is how every image under Repositories is verified, before it is pulled or
	// rendered, by every Package, ClusterPackage and HostedClusterPackage (and each member of a
	// fleet) that names one, whatever its own spec.verify says (that is checked as well when
	// set). Its secretRef is read in the controller's namespace, never in the resource's. A
	// policy that covers an image also satisfies --require-signatures for it.
	// +required
	Verify Verification `json:"verify"`
}

// TrustPolicy is a cluster-scoped policy of the operator: images under its repositories are
// installed only when signed as its verify says, whichever resource names them and whatever
// that resource's own spec.verify trusts. Several policies covering one image must all be met.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tp
// +kubebuilder:printcolumn:name="Repositories",type="string",JSONPath=".spec.repositories"
// +kubebuilder:printcolumn:name="Secret",type="string",JSONPath=".spec.verify.secretRef.name"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type TrustPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TrustPolicySpec `json:"spec"`
}

// TrustPolicyList is a list of TrustPolicies.
// +kubebuilder:object:root=true
type TrustPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrustPolicy `json:"items"`
}
