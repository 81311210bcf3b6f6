package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// ObjectDeploymentKind is the kind of a namespaced inline object deployment.
	ObjectDeploymentKind = "ObjectDeployment"
	// ClusterObjectDeploymentKind is the kind of a cluster-scoped inline object deployment.
	ClusterObjectDeploymentKind = "ClusterObjectDeployment"
)

// ObjectDeploymentSpec holds phases of objects inline.
type ObjectDeploymentSpec struct {
	// Template holds the phases and probes.
	// +required
	Template ObjectSetTemplate `json:"template"`

	// Interval is how often drift is corrected. The controller spreads it by ±10 % (--interval-jitter-percentage).
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Suspend stops reconciling this resource: nothing is applied or pruned, and status keeps
	// what was last observed (a reconcile request is still acknowledged). Deleting a suspended
	// resource still tears its objects down.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// AdoptionPolicy says whether existing objects not owned by this deployment may be taken over.
	// +optional
	// +kubebuilder:default=Never
	AdoptionPolicy AdoptionPolicy `json:"adoptionPolicy,omitempty"`
}

// ObjectSetTemplate wraps the object set's spec.
type ObjectSetTemplate struct {
	// Spec holds the phases and probes.
	// +required
	Spec ObjectSetTemplateSpec `json:"spec"`
}

// ObjectSetTemplateSpec is the inline form of a rendered package.
type ObjectSetTemplateSpec struct {
	// Phases in the order they are applied.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=name
	Phases []ObjectSetPhase `json:"phases"`

	// AvailabilityProbes add availability checks for selected objects.
	// +optional
	AvailabilityProbes []AvailabilityProbe `json:"availabilityProbes,omitempty"`
}

// ObjectSetPhase is one phase of inline objects.
type ObjectSetPhase struct {
	// Name of the phase.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Class routes the phase: empty for the management cluster, hosted-cluster for the hosted
	// cluster of the resource's hosted-control-plane namespace. Hosted-cluster phases wait while
	// its HostedCluster is not Available or is paused (ReconciliationActive=False).
	// +optional
	// +kubebuilder:validation:Enum="";hosted-cluster
	Class string `json:"class,omitempty"`

	// Objects of the phase.
	// +optional
	Objects []ObjectSetObject `json:"objects,omitempty"`
}

// ObjectSetObject wraps one object.
type ObjectSetObject struct {
	// Object is a complete Kubernetes object.
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Object runtime.RawExtension `json:"object"`
}

// ObjectDeploymentStatus is the observed state of an object deployment.
type ObjectDeploymentStatus struct {
	ApplyStatus `json:",inline"`
}

// ObjectDeployment applies inline phases of objects with the same engine as a Package.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name is at most 63 characters: the objects it applies carry it in the label pkgsync.dev/owner-name, whose values are at most 63"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=od,categories=pkgsync
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ObjectDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ObjectDeploymentSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	Status ObjectDeploymentStatus `json:"status,omitempty"`
}

// ObjectDeploymentList is a list of ObjectDeployments.
// +kubebuilder:object:root=true
type ObjectDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ObjectDeployment `json:"items"`
}

// ClusterObjectDeployment is the cluster-scoped twin of ObjectDeployment.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name is at most 63 characters: the objects it applies carry it in the label pkgsync.dev/owner-name, whose values are at most 63"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cod,categories=pkgsync
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ClusterObjectDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ObjectDeploymentSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	Status ObjectDeploymentStatus `json:"status,omitempty"`
}

// ClusterObjectDeploymentList is a list of ClusterObjectDeployments.
// +kubebuilder:object:root=true
type ClusterObjectDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterObjectDeployment `json:"items"`
}

// GetInterval returns the reconciliation interval, defaulted.
func (in *ObjectDeploymentSpec) GetInterval() time.Duration {
	if in.Interval == nil || in.Interval.Duration <= 0 {
		return DefaultInterval
	}
	return in.Interval.Duration
}

// GetConditions returns the status conditions, for github.com/fluxcd/pkg/runtime/conditions.
func (in *ObjectDeployment) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *ObjectDeployment) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the status conditions, for github.com/fluxcd/pkg/runtime/conditions.
func (in *ClusterObjectDeployment) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *ClusterObjectDeployment) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetSpec returns the spec, for code shared by both scopes.
func (in *ObjectDeployment) GetSpec() *ObjectDeploymentSpec { return &in.Spec }

// GetStatus returns the status, for code shared by both scopes.
func (in *ObjectDeployment) GetStatus() *ObjectDeploymentStatus { return &in.Status }

// GetSpec returns the spec, for code shared by both scopes.
func (in *ClusterObjectDeployment) GetSpec() *ObjectDeploymentSpec { return &in.Spec }

// GetStatus returns the status, for code shared by both scopes.
func (in *ClusterObjectDeployment) GetStatus() *ObjectDeploymentStatus { return &in.Status }
