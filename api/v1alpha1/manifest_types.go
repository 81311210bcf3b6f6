package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// PackageManifestKind is the kind of a package's manifest.yaml.
	PackageManifestKind = "PackageManifest"

	// PhaseAnnotation names the phase an object of a package belongs to.
	PhaseAnnotation = "pkgsync.dev/phase"

	// PackageOperatorManifestAPIVersion is the apiVersion of Package Operator's manifest.yaml,
	// which pkgsync reads as it is.
	PackageOperatorManifestAPIVersion = "manifests.package-operator.run/v1alpha1"
	// PackageOperatorPhaseAnnotation is Package Operator's phase annotation, read like pkgsync's.
	PackageOperatorPhaseAnnotation = "package-operator.run/phase"
	// PackageOperatorConditionAnnotation holds a CEL expression; an object whose expression is
	// false is left out of the render. The annotation is removed from the rendered object.
	PackageOperatorConditionAnnotation = "package-operator.run/condition"
	// PackageOperatorConditionMapAnnotation maps conditions of an object into the status of the
	// resource that installs it, one "SOURCE => prefix/DESTINATION" per line. The annotation is
	// removed from the rendered object.
	PackageOperatorConditionMapAnnotation = "package-operator.run/condition-map"
	// PackageOperatorImageDir is the directory of a Package Operator image that holds the
	// package; pkgsync re-roots such an image there.
	PackageOperatorImageDir = "package"

	// ClassHostedCluster is the phase class whose objects go to the hosted cluster's API server.
	// The empty class means the management cluster.
	ClassHostedCluster = "hosted-cluster"
)

// PackageManifest is the manifest.yaml at the root of a package. It is not served by an API
// server; it only shares the API group's vocabulary.
// +kubebuilder:skipversion
type PackageManifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the package.
	Spec PackageManifestSpec `json:"spec"`

	// Test holds the package's template tests, read by "pkgsync test" and "pkgsync validate"
	// and never by the controller. It is Package Operator's test section, field by field, in
	// both manifest formats.
	// +optional
	Test PackageManifestTest `json:"test,omitempty"`
}

// PackageManifestTest is the test section of a manifest, as in Package Operator's manifest.
type PackageManifestTest struct {
	// Template lists the template test cases. "pkgsync test" renders each with its context
	// and compares each YAML file of the package, as rendered, with
	// .test-fixtures/NAME/PATH next to the manifest (a template's PATH is its name without
	// .gotmpl), writing the fixtures of a case that has none; "pkgsync validate" renders every
	// case. Every image of spec.images renders as registry.package-operator.run/static-image.
	// +optional
	Template []PackageManifestTestCaseTemplate `json:"template,omitempty"`

	// Kubeconform asks for the rendered objects of every case to be checked against schemas.
	// +optional
	Kubeconform *PackageManifestTestKubeconform `json:"kubeconform,omitempty"`
}

// PackageManifestTestCaseTemplate is one template test case: a name and the context the
// package is rendered with.
type PackageManifestTestCaseTemplate struct {
	// Name of the case, unique in the manifest: the directory of its fixtures in
	// .test-fixtures, so a ConfigMap key's characters only (letters, digits, '-', '_', '.').
	// +required
	Name string `json:"name"`

	// Context is what the templates see: .package, .config and .environment. A field left
	// out is empty, as in Package Operator: the package's name is not the manifest's.
	// +optional
	Context TemplateContext `json:"context,omitempty"`
}

// TemplateContext is the context a test case renders with. Its configuration is validated
// against spec.config like a Package's (a case the schema refuses makes the package invalid),
// then pruned and defaulted.
type TemplateContext struct {
	// Package is what templates see as .package.
	// +optional
	Package TemplateContextPackage `json:"package"`

	// Config is the configuration, what templates see as .config after defaulting.
	// +optional
	Config *apiextensionsv1.JSON `json:"config,omitempty"`

	// Environment is what templates see as .environment.
	// +optional
	Environment PackageEnvironment `json:"environment"`
}

// TemplateContextPackage is the Package a test case renders for. Its JSON encoding is
// .package of a Package Operator package's template context.
type TemplateContextPackage struct {
	// Metadata of the Package: .package.metadata.
	// +optional
	Metadata TemplateContextObjectMeta `json:"metadata"`

	// Image is the package image the Package names: .package.image.
	// +optional
	Image string `json:"image"`
}

// TemplateContextObjectMeta is the simplified object metadata of the template context.
type TemplateContextObjectMeta struct {
	// Name of the object.
	// +optional
	Name string `json:"name"`

	// Namespace of the object.
	// +optional
	Namespace string `json:"namespace"`

	// Labels of the object.
	// +optional
	Labels map[string]string `json:"labels"`

	// Annotations of the object.
	// +optional
	Annotations map[string]string `json:"annotations"`
}

// PackageEnvironment describes the clusters a package renders for, as Package Operator's type
// of the same name, with its JSON names and omitempty rules: its JSON encoding is .environment
// of a Package Operator package's template context.
type PackageEnvironment struct {
	// Kubernetes is the management cluster's Kubernetes.
	// +optional
	Kubernetes PackageEnvironmentKubernetes `json:"kubernetes"`

	// OpenShift is set on an OpenShift cluster.
	// +optional
	OpenShift *PackageEnvironmentOpenShift `json:"openShift,omitempty"`

	// Proxy is the cluster-wide proxy, when one is set.
	// +optional
	Proxy *PackageEnvironmentProxy `json:"proxy,omitempty"`

	// HyperShift is set on a HyperShift management cluster.
	// +optional
	HyperShift *PackageEnvironmentHyperShift `json:"hyperShift,omitempty"`
}

// PackageEnvironmentKubernetes is the Kubernetes of the environment.
type PackageEnvironmentKubernetes struct {
	// Version of the API server, for example v1.31.2.
	// +optional
	Version string `json:"version"`
}

// PackageEnvironmentOpenShift is the OpenShift of the environment.
type PackageEnvironmentOpenShift struct {
	// Version of OpenShift, for example 4.16.3.
	// +optional
	Version string `json:"version"`

	// Managed is set on a managed OpenShift cluster.
	// +optional
	Managed *PackageEnvironmentManagedOpenShift `json:"managed,omitempty"`
}

// PackageEnvironmentManagedOpenShift is what a managed OpenShift cluster tells packages.
type PackageEnvironmentManagedOpenShift struct {
	// Data is the content of the cluster's managed OpenShift ConfigMap.
	// +optional
	Data map[string]string `json:"data"`
}

// PackageEnvironmentProxy is the cluster-wide proxy of the environment.
type PackageEnvironmentProxy struct {
	// HTTPProxy is the proxy for HTTP requests.
	// +optional
	HTTPProxy string `json:"httpProxy,omitempty"`

	// HTTPSProxy is the proxy for HTTPS requests.
	// +optional
	HTTPSProxy string `json:"httpsProxy,omitempty"`

	// NoProxy lists the hosts reached without a proxy.
	// +optional
	NoProxy string `json:"noProxy,omitempty"`
}

// PackageEnvironmentHyperShift is the HyperShift of the environment.
type PackageEnvironmentHyperShift struct {
	// HostedCluster is the hosted cluster a package of a HostedClusterPackage renders for.
	// +optional
	HostedCluster *PackageEnvironmentHyperShiftHostedCluster `json:"hostedCluster"`
}

// PackageEnvironmentHyperShiftHostedCluster is the hosted cluster of the environment.
type PackageEnvironmentHyperShiftHostedCluster struct {
	// Metadata of the HostedCluster object.
	// +optional
	Metadata TemplateContextObjectMeta `json:"metadata"`

	// HostedClusterNamespace is the namespace of the hosted cluster's control plane.
	// +optional
	HostedClusterNamespace string `json:"hostedClusterNamespace"`

	// NodeSelector of the hosted cluster's control plane.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// PackageManifestTestKubeconform configures the schema check of the rendered test cases.
type PackageManifestTestKubeconform struct {
	// KubernetesVersion is the Kubernetes version whose schemas the objects are checked
	// against, for example v1.31.0.
	// +required
	KubernetesVersion string `json:"kubernetesVersion"`

	// SchemaLocations are where further schemas are found, as kubeconform's -schema-location.
	// +optional
	SchemaLocations []string `json:"schemaLocations,omitempty"`
}

// PackageManifestSpec is the author-facing description of a package.
type PackageManifestSpec struct {
	// Scopes lists where the package may be installed: Namespaced (Package), Cluster (ClusterPackage).
	// +optional
	Scopes []PackageScope `json:"scopes,omitempty"`

	// Phases in the order they are applied. Teardown runs them in reverse.
	// +required
	Phases []PhaseSpec `json:"phases"`

	// AvailabilityProbes add availability checks for selected objects.
	// +optional
	AvailabilityProbes []AvailabilityProbe `json:"availabilityProbes,omitempty"`

	// Config declares the package's configuration schema.
	// +optional
	Config PackageConfig `json:"config,omitempty"`

	// Images names the container images templates may refer to as .images.NAME.
	// +optional
	Images []PackageImage `json:"images,omitempty"`

	// Components, when set (components: {}), makes this a multi-component package: each
	// directory of components/ is a package of its own, installed by a Package naming it in
	// spec.component, and components/ is not part of the root package.
	// +optional
	Components *PackageComponents `json:"components,omitempty"`

	// Constraints must all hold in the cluster before anything of the package is applied.
	// +optional
	Constraints []PackageConstraint `json:"constraints,omitempty"`

	// Filter leaves objects and files out of the render by CEL expressions.
	// +optional
	Filter PackageFilter `json:"filter,omitempty"`

	// IgnoreFields names fields of the package's objects that pkgsync sets on creation only and
	// then leaves to other controllers (an autoscaler's spec.replicas, an injected caBundle).
	// +optional
	IgnoreFields []IgnoreFields `json:"ignoreFields,omitempty"`
}

// PackageConstraint is one condition the cluster must meet; exactly one field is set.
type PackageConstraint struct {
	// Platform lists the platforms the package runs on: Kubernetes, OpenShift.
	// +optional
	Platform []PlatformName `json:"platform,omitempty"`

	// PlatformVersion requires a version of a platform.
	// +optional
	PlatformVersion *PlatformVersionConstraint `json:"platformVersion,omitempty"`

	// UniqueInScope allows one installation of the package per namespace for Packages, per
	// cluster for ClusterPackages.
	// +optional
	UniqueInScope *UniqueInScopeConstraint `json:"uniqueInScope,omitempty"`
}

// PlatformName names a platform of a constraint.
type PlatformName string

const (
	// PlatformKubernetes is any Kubernetes cluster, OpenShift included.
	PlatformKubernetes PlatformName = "Kubernetes"
	// PlatformOpenShift is an OpenShift cluster: one with a ClusterVersion.
	PlatformOpenShift PlatformName = "OpenShift"
)

// PlatformVersionConstraint requires the version of a platform to be in a range.
type PlatformVersionConstraint struct {
	// Name of the platform: Kubernetes or OpenShift.
	// +required
	Name PlatformName `json:"name"`

	// Range is a semantic version range, for example ">=1.30" or ">=4.14 <4.17".
	// +required
	Range string `json:"range"`
}

// UniqueInScopeConstraint has no fields.
type UniqueInScopeConstraint struct{}

// PackageComponents enables multi-component packages. It has no fields.
type PackageComponents struct{}

// PackageFilter holds the CEL expressions that leave parts of a package out.
type PackageFilter struct {
	// Conditions are named CEL expressions, evaluated once per render in order; later
	// expressions (and the condition annotation, and Paths) read their results as cond.NAME.
	// +optional
	Conditions []NamedCondition `json:"conditions,omitempty"`

	// Paths leave out every file matching Glob when Expression is false.
	// +optional
	Paths []PathFilter `json:"paths,omitempty"`
}

// NamedCondition is a CEL expression whose result other expressions read as cond.NAME.
type NamedCondition struct {
	// Name is a CEL identifier: a letter or _, then letters, digits or _.
	// +required
	Name string `json:"name"`

	// Expression is a CEL expression returning a bool.
	// +required
	Expression string `json:"expression"`
}

// PathFilter leaves out the files matching Glob when Expression is false.
type PathFilter struct {
	// Glob matches package-relative file paths; ** matches any number of directories.
	// +required
	Glob string `json:"glob"`

	// Expression is a CEL expression returning a bool; false leaves the files out.
	// +required
	Expression string `json:"expression"`
}

// PackageScope says where a package may be installed.
// +kubebuilder:validation:Enum=Cluster;Namespaced
type PackageScope string

const (
	// ScopeCluster allows installation by a ClusterPackage.
	ScopeCluster PackageScope = "Cluster"
	// ScopeNamespaced allows installation by a Package.
	ScopeNamespaced PackageScope = "Namespaced"
)

// PhaseSpec is one phase of a package.
type PhaseSpec struct {
	// Name of the phase, referenced by the phase annotation of the objects.
	// +required
	Name string `json:"name"`

	// Class routes the phase: empty for the management cluster, hosted-cluster for the hosted
	// cluster's API server.
	// +optional
	Class string `json:"class,omitempty"`
}

// PackageConfig holds the configuration schema.
type PackageConfig struct {
	// OpenAPIV3Schema validates, prunes and defaults the configuration, with the structural
	// schema semantics of CustomResourceDefinitions.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	OpenAPIV3Schema *apiextensionsv1.JSONSchemaProps `json:"openAPIV3Schema,omitempty"`
}

// PackageImage is a named container image.
type PackageImage struct {
	// Name is the key under .images in templates.
	// +required
	Name string `json:"name"`

	// Image is the image reference.
	// +required
	Image string `json:"image"`
}

// PackageManifestLockKind is the kind of a package's manifest.lock.yaml.
const PackageManifestLockKind = "PackageManifestLock"

// PackageManifestLock is a package's manifest.lock.yaml: the digest every image of
// spec.images resolved to. Its fields are those of Package Operator's type of the same name, so
// that a lock file written by either tool is read by both. Like PackageManifest it is not
// served by an API server.
// +kubebuilder:skipversion
type PackageManifestLock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the resolved images.
	Spec PackageManifestLockSpec `json:"spec,omitempty"`
}

// PackageManifestLockSpec lists what a lock file pins.
type PackageManifestLockSpec struct {
	// Images are the images of the manifest's spec.images, each with its digest.
	// +required
	Images []PackageManifestLockImage `json:"images"`

	// Dependencies are the package images Package Operator's dependency solver chose. pkgsync
	// installs no dependencies: a lock file listing any is refused.
	// +optional
	Dependencies []PackageManifestLockDependency `json:"dependencies,omitempty"`
}

// PackageManifestLockImage is one image of spec.images resolved to its manifest digest.
type PackageManifestLockImage struct {
	// Name is the image's name in spec.images.
	// +required
	Name string `json:"name"`

	// Image is the reference spec.images gives, usually with a tag.
	// +required
	Image string `json:"image"`

	// Digest is the manifest digest the reference resolved to, sha256:....
	// +required
	Digest string `json:"digest"`
}

// PackageManifestLockDependency is a dependency package image chosen by Package Operator's
// solver. It is read only to be refused with a clear message.
type PackageManifestLockDependency struct {
	// Name of the dependency.
	// +required
	Name string `json:"name"`

	// Image is the dependency's package image.
	// +required
	Image string `json:"image"`

	// Digest of the image.
	// +required
	Digest string `json:"digest"`

	// Version of the dependency that was chosen.
	// +required
	Version string `json:"version"`
}
