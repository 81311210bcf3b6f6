package v1alpha1

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// PackageKind is the kind of a namespaced package installation.
	PackageKind = "Package"
	// ClusterPackageKind is the kind of a cluster-scoped package installation.
	ClusterPackageKind = "ClusterPackage"

	// DefaultInterval is how often a package's tag is re-resolved and drift corrected.
	DefaultInterval = 10 * time.Minute
	// DefaultTimeout bounds one reconciliation: pulling, rendering and one apply pass.
	DefaultTimeout = 5 * time.Minute
	// MaxTimeout is the longest spec.timeout honoured; MinRetryInterval the shortest
	// spec.retryInterval. The schema refuses others; these hold for objects stored before it did.
	MaxTimeout       = 10 * time.Minute
	MinRetryInterval = time.Second
)

// PackageSpec says which package to install and how.
// +kubebuilder:validation:XValidation:rule="!has(self.pullSecretRef) || !has(self.provider) || self.provider == 'generic'",message="spec.pullSecretRef is read with spec.provider generic only: a cloud provider's credentials come from workload identity (remove one of them)"
// +kubebuilder:validation:XValidation:rule="!has(self.semver) || (!self.image.contains('@') && !self.image.matches(':[^/]*$'))",message="spec.semver chooses the tag: spec.image must name the repository without a tag or digest (registry.example.com/addons/monitoring)"
type PackageSpec struct {
	// Image is the package image: repository with a tag, a digest, or both
	// (registry.example.com/addons/monitoring:v1.2.0@sha256:...). With both, the digest wins and
	// the tag is informational. With spec.semver it is the repository alone, without tag or
	// digest.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// Semver, when set, chooses the tag: the tags of the repository named by spec.image are
	// listed and the highest version the range accepts is installed, re-evaluated every
	// interval. The syntax is github.com/Masterminds/semver's: ">=1.4.0 <2.0.0", "~1.4", "^1",
	// "1.x"; comparisons separated by spaces or commas must all hold, "||" separates
	// alternatives. Tags that are not versions are ignored and a leading v is allowed (v1.4.2).
	// Pre-releases (1.5.0-rc.1) count only when the range names a pre-release itself
	// (">=1.5.0-0"). No tag in the range: Ready=False, reason NoMatchingVersion, looked at again
	// at the next interval. A range that does not parse stalls (reason InvalidVersionRange).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Semver string `json:"semver,omitempty"`

	// Config is the package configuration, validated, pruned and defaulted against the package's
	// configuration schema.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Config *apiextensionsv1.JSON `json:"config,omitempty"`

	// Component selects one component of a multi-component package (the directory
	// components/NAME of a package whose manifest sets spec.components); empty installs the
	// root package. Naming a component of a package without components, or one it does not
	// have, fails the render (Ready=False, reason RenderFailed).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	Component string `json:"component,omitempty"`

	// Interval is how often the tag is re-resolved and drift is corrected. The controller spreads it by ±10 % (--interval-jitter-percentage).
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// RetryInterval is how soon a failed reconciliation is retried, the same fixed interval
	// after every failure (no backoff). Unset means the controller's --retry-interval (30s by
	// default). At least 1s: a resource retried without pause would cost the API server and its
	// registry a request loop.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="spec.retryInterval is at least 1s"
	RetryInterval *metav1.Duration `json:"retryInterval,omitempty"`

	// Timeout bounds one reconciliation: resolving, pulling, rendering and one apply pass (5m
	// by default). At most 10m: a reconcile holds one of the controller's workers, which every
	// resource of its kind shares, for as long as a slow registry lets it.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('10m')",message="spec.timeout is at most 10m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Suspend stops reconciling this package: nothing is resolved, applied or pruned, and status
	// keeps what was last observed (a reconcile request is still acknowledged). Deleting a
	// suspended package still tears its objects down.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// PullSecretRef names a kubernetes.io/dockerconfigjson Secret with registry credentials, in
	// the Package's namespace (for a ClusterPackage, in the controller's namespace). Read with
	// provider generic only.
	// +optional
	PullSecretRef *meta.LocalObjectReference `json:"pullSecretRef,omitempty"`

	// Provider says where the registry credentials come from. generic (the default, also when
	// empty) reads spec.pullSecretRef. aws, azure and gcp get short-lived credentials for the
	// cloud's registry (Amazon ECR, Azure Container Registry, Google Artifact Registry) from
	// workload identity: the ServiceAccount of spec.serviceAccountName (object-level identity:
	// its token, from a TokenRequest, is exchanged for the cloud role its annotation names), or,
	// without one, the controller's own identity. The credentials are kept in memory until
	// shortly before they expire, never written to an object, and sent to the provider's
	// registries only (a mirror elsewhere is read anonymously); spec.image must name one of
	// them. docs/operations.md has the setup for each cloud.
	// +optional
	// +kubebuilder:validation:Enum=generic;aws;azure;gcp
	Provider RegistryProvider `json:"provider,omitempty"`

	// ServiceAccountName is impersonated for every request to the management cluster, so a
	// package can do no more than that ServiceAccount may: in the Package's namespace (for a
	// ClusterPackage, in the controller's namespace). Empty means the controller's
	// --default-service-account for a Package when set, else the controller's own identity.
	// Hosted-cluster phases always use the connector credentials. With a cloud spec.provider it
	// is the cloud identity too: its token is exchanged for registry credentials, so that one
	// tenant's cloud role never pulls another's images (the controller's
	// --no-object-level-workload-identity refuses that).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// AdoptionPolicy says whether existing objects not owned by this package may be taken over.
	// +optional
	// +kubebuilder:default=Never
	AdoptionPolicy AdoptionPolicy `json:"adoptionPolicy,omitempty"`

	// Prune deletes objects that left the package once the new revision is complete.
	// +optional
	// +kubebuilder:default=true
	Prune *bool `json:"prune,omitempty"`

	// DependsOn lists installations that must be Ready before this one is applied: Packages
	// of the same namespace, or ClusterPackages (a ClusterPackage may depend on ClusterPackages
	// only). While one is not, nothing is resolved, pulled or applied, and Ready is False with
	// reason DependencyNotReady naming it. A cycle is refused (reason DependencyCycle, stalled).
	// When both are deleted, a dependent is torn down before what it depends on.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	DependsOn []Dependency `json:"dependsOn,omitempty"`

	// ConfigFrom lists ConfigMaps and Secrets, in the resource's own namespace (for a
	// ClusterPackage, in the controller's namespace), whose data are merged in order under
	// spec.config: later entries win over earlier ones, and spec.config wins over all of them.
	// The result is validated by the package's configuration schema. A change of a referenced
	// object reconciles the resource. Secret values never appear in status, events or logs.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	ConfigFrom []ConfigSource `json:"configFrom,omitempty"`

	// Verify, when set, requires a valid signature on the image's digest before it is pulled
	// and rendered. A digest that is unsigned or whose signatures do not verify is never
	// applied: the last applied revision stays, and Ready is False with reason
	// VerificationFailed. A digest is verified once per key set.
	// +optional
	Verify *Verification `json:"verify,omitempty"`

	// DriftPolicy says what a reconcile does with an applied object someone changed: Correct
	// applies it again (the default), Report leaves it and reports the changed fields in
	// status.drift, the Drifted condition, an event and the pkgsync_drifted_objects metric. A
	// new revision (digest or configuration) is applied either way. docs/drift.md.
	// +optional
	// +kubebuilder:default=Correct
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`

	// IgnoreFields names fields of the package's objects that pkgsync sets on creation only and
	// then leaves to others, adding to the package manifest's spec.ignoreFields. docs/drift.md.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	IgnoreFields []IgnoreFields `json:"ignoreFields,omitempty"`
}

// Dependency names an installation that must be Ready before the one that names it is applied.
type Dependency struct {
	// Kind of the dependency: Package (in the dependent's own namespace) or ClusterPackage.
	// Empty means the dependent's own kind. There is no namespace: a Package depends on
	// Packages of its own namespace only, so that it cannot read, or wait on, another
	// namespace's installations.
	// +optional
	// +kubebuilder:validation:Enum=Package;ClusterPackage
	Kind string `json:"kind,omitempty"`

	// Name of the dependency.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// ReadyExpr, when set, replaces the readiness check (Ready=True at the dependency's current
	// generation) with a CEL expression that must evaluate to true. It sees the dependency as
	// dep and the dependent as self, each through an allow-list: apiVersion, kind, metadata
	// (name, namespace, generation, labels, the pkgsync.dev/hold, fleet-revision and
	// fleet-revision-time annotations only) and status
	// (observedGeneration, conditions without messages, lastAppliedRevision, lastAppliedTag,
	// lastAppliedVersion); for example "dep.status.lastAppliedTag == 'v2'". Its cost is
	// bounded, matches included.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ReadyExpr string `json:"readyExpr,omitempty"`
}

// ConfigSource names a ConfigMap or Secret whose data are merged into a package's configuration.
type ConfigSource struct {
	// Kind of the object: ConfigMap or Secret.
	// +required
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`

	// Name of the object, in the resource's own namespace (for a ClusterPackage, in the
	// controller's namespace).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Key of the object's data to read; config.yaml by default. Without targetPath it must hold
	// a YAML or JSON object, merged at the top of the configuration (maps merged key by key,
	// anything else replaced).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[-._a-zA-Z0-9]+$"
	Key string `json:"key,omitempty"`

	// TargetPath, when set, puts the key's value, as a string, at this dot-separated path of the
	// configuration (database.password) instead of merging it as an object.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[-_a-zA-Z0-9]+(\\.[-_a-zA-Z0-9]+)*$"
	TargetPath string `json:"targetPath,omitempty"`

	// Optional lets the resource be applied without the object or its key: it then contributes
	// nothing. Otherwise a missing object or key holds the resource (Ready=False, reason
	// ConfigSourceNotFound) until it appears.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// GetKey returns the key of a ConfigSource, defaulted.
func (in *ConfigSource) GetKey() string {
	if in.Key == "" {
		return DefaultConfigKey
	}
	return in.Key
}

// DefaultConfigKey is the key a ConfigSource reads by default.
const DefaultConfigKey = "config.yaml"

// MaxStatusWarnings and MaxStatusWarningLength bound PackageStatus.Warnings: lines, and bytes a
// line.
const (
	MaxStatusWarnings      = 16
	MaxStatusWarningLength = 1024
)

// PackageStatus is the observed state of a package installation.
type PackageStatus struct {
	ApplyStatus `json:",inline"`

	// LastAttemptedRevision is the image digest of the last reconciliation attempt.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// LastAttemptedTag is the tag that lastAttemptedRevision was resolved from: with
	// spec.semver, the highest tag the range accepted; otherwise the tag of spec.image (empty
	// for an image given by digest alone). Flux writes the pair as TAG@DIGEST.
	// +optional
	LastAttemptedTag string `json:"lastAttemptedTag,omitempty"`

	// LastAttemptedVersion is the version of lastAttemptedRevision as a user knows it: with
	// spec.semver the tag the range chose, otherwise the image manifest's
	// org.opencontainers.image.version annotation (pkgsync build --version). Empty when the
	// image declares none, or one longer than 128 bytes or holding a character that is not
	// printable (a control character, a line break, bidirectional formatting): the annotation
	// is the pusher's text, shown on terminals, and is left out rather than cleaned so that it
	// cannot read as another version. Known once the revision was pulled (or its render reused).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	LastAttemptedVersion string `json:"lastAttemptedVersion,omitempty"`

	// Warnings are what the last render of lastAttemptedRevision did that the Package's author
	// may not expect and that did not stop it, one line each: a key of spec.config (or
	// spec.configFrom) that the package's configuration schema does not declare, dropped as the
	// API server drops an unknown field of a custom resource, with the nearest declared name.
	// Each new set is also a Warning event (reason ConfigPruned). Cleared by a render without
	// warnings and by one that fails (its error is in the Ready condition). At most 16 lines of
	// at most 1024 bytes; the last says how many more there were.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	Warnings []string `json:"warnings,omitempty"`

	// LastAppliedRevision is the image digest of the last revision applied completely.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`

	// LastAppliedTag is the tag that lastAppliedRevision was resolved from.
	// +optional
	LastAppliedTag string `json:"lastAppliedTag,omitempty"`

	// LastAppliedVersion is the version of lastAppliedRevision, as lastAttemptedVersion says.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	LastAppliedVersion string `json:"lastAppliedVersion,omitempty"`

	// LastAppliedConfigDigest is the sha256 of the configuration of the last complete revision.
	// +optional
	LastAppliedConfigDigest string `json:"lastAppliedConfigDigest,omitempty"`

	// LastAppliedFrom is the registry and repository (REGISTRY/REPOSITORY) that served the
	// last revision applied completely, when that is not spec.image's own: a mirror
	// (ImageDigestMirrorSet, ImageTagMirrorSet, the spec.imageContentSources of the
	// HostedCluster of its hosted-control-plane namespace) or the controller's registry
	// overrides.
	// Empty when the content came from where spec.image names it.
	// +optional
	LastAppliedFrom string `json:"lastAppliedFrom,omitempty"`
}

// Package installs a package image into the management cluster and, for hosted-cluster
// phases, into the hosted cluster of its hosted-control-plane namespace.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name is at most 63 characters: the objects it applies carry it in the label pkgsync.dev/owner-name, whose values are at most 63"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pkg,categories=pkgsync
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.lastAppliedVersion"
// +kubebuilder:printcolumn:name="Revision",type="string",JSONPath=".status.lastAppliedRevision",priority=1
// +kubebuilder:printcolumn:name="Tag",type="string",JSONPath=".status.lastAppliedTag",priority=1
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Package struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PackageSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	Status PackageStatus `json:"status,omitempty"`
}

// PackageList is a list of Packages.
// +kubebuilder:object:root=true
type PackageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Package `json:"items"`
}

// ClusterPackage installs a package cluster-wide; it may create cluster-scoped objects and
// objects in any namespace.
// +kubebuilder:validation:XValidation:rule="!has(self.spec.dependsOn) || self.spec.dependsOn.all(d, !has(d.kind) || d.kind == 'ClusterPackage')",message="a ClusterPackage may depend on ClusterPackages only: spec.dependsOn[].kind must be ClusterPackage or empty"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name is at most 63 characters: the objects it applies carry it in the label pkgsync.dev/owner-name, whose values are at most 63"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cpkg,categories=pkgsync
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.lastAppliedVersion"
// +kubebuilder:printcolumn:name="Revision",type="string",JSONPath=".status.lastAppliedRevision",priority=1
// +kubebuilder:printcolumn:name="Tag",type="string",JSONPath=".status.lastAppliedTag",priority=1
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ClusterPackage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PackageSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	Status PackageStatus `json:"status,omitempty"`
}

// ClusterPackageList is a list of ClusterPackages.
// +kubebuilder:object:root=true
type ClusterPackageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPackage `json:"items"`
}

// RegistryProvider names where a resource's registry credentials come from (spec.provider).
type RegistryProvider string

const (
	// RegistryProviderGeneric reads spec.pullSecretRef (or pulls anonymously).
	RegistryProviderGeneric RegistryProvider = "generic"
	// RegistryProviderAWS exchanges workload identity for Amazon ECR credentials.
	RegistryProviderAWS RegistryProvider = "aws"
	// RegistryProviderAzure exchanges workload identity for Azure Container Registry credentials.
	RegistryProviderAzure RegistryProvider = "azure"
	// RegistryProviderGCP exchanges workload identity for Google Artifact Registry credentials.
	RegistryProviderGCP RegistryProvider = "gcp"
)

// GetProvider returns spec.provider, defaulted to generic.
func (in *PackageSpec) GetProvider() RegistryProvider {
	if in.Provider == "" {
		return RegistryProviderGeneric
	}
	return in.Provider
}

// GetInterval returns the reconciliation interval, defaulted.
func (in *PackageSpec) GetInterval() time.Duration {
	if in.Interval == nil || in.Interval.Duration <= 0 {
		return DefaultInterval
	}
	return in.Interval.Duration
}

// GetTimeout returns the reconciliation timeout, defaulted, at most MaxTimeout.
func (in *PackageSpec) GetTimeout() time.Duration {
	if in.Timeout == nil || in.Timeout.Duration <= 0 {
		return DefaultTimeout
	}
	return min(in.Timeout.Duration, MaxTimeout)
}

// GetRetryInterval returns spec.retryInterval, at least MinRetryInterval; zero when unset (the
// controller's own applies).
func (in *PackageSpec) GetRetryInterval() time.Duration {
	if in.RetryInterval == nil || in.RetryInterval.Duration <= 0 {
		return 0
	}
	return max(in.RetryInterval.Duration, MinRetryInterval)
}

// GetDriftPolicy returns spec.driftPolicy, defaulted.
func (in *PackageSpec) GetDriftPolicy() DriftPolicy {
	if in.DriftPolicy == "" {
		return DriftCorrect
	}
	return in.DriftPolicy
}

// PruneEnabled reports whether objects that left the package are deleted.
func (in *PackageSpec) PruneEnabled() bool { return in.Prune == nil || *in.Prune }

// GetConditions returns the status conditions, for github.com/fluxcd/pkg/runtime/conditions.
func (in *Package) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *Package) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the status conditions, for github.com/fluxcd/pkg/runtime/conditions.
func (in *ClusterPackage) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *ClusterPackage) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetSpec returns the spec, for code shared by Package and ClusterPackage.
func (in *Package) GetSpec() *PackageSpec { return &in.Spec }

// GetStatus returns the status, for code shared by Package and ClusterPackage.
func (in *Package) GetStatus() *PackageStatus { return &in.Status }

// GetSpec returns the spec, for code shared by Package and ClusterPackage.
func (in *ClusterPackage) GetSpec() *PackageSpec { return &in.Spec }

// GetStatus returns the status, for code shared by Package and ClusterPackage.
func (in *ClusterPackage) GetStatus() *PackageStatus { return &in.Status }
