package v1alpha1

import (
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// HostedClusterPackageKind is the kind of a fleet: one package rolled out to every matching
	// hosted cluster.
	HostedClusterPackageKind = "HostedClusterPackage"

	// FleetLabel is set on every member Package to the name of the HostedClusterPackage that
	// keeps it.
	FleetLabel = "pkgsync.dev/fleet"
	// FleetUIDAnnotation on every member Package and every Secret a fleet copies holds the UID
	// of the HostedClusterPackage that keeps it: with the label FleetLabel, it is what makes the
	// object the fleet's. An ownerReference says the same, but the garbage collector takes it
	// off (kubectl delete --cascade=orphan) and, under deletionPolicy Orphan, the fleet sets
	// none; the annotation stays until the fleet releases or deletes the object.
	FleetUIDAnnotation = "pkgsync.dev/fleet-uid"
	// FleetRevisionAnnotation on a member Package names the fleet revision its spec was made
	// from (FleetRevision.Name).
	FleetRevisionAnnotation = "pkgsync.dev/fleet-revision"
	// FleetRevisionTimeAnnotation on a member Package records when the fleet moved it to its
	// revision (RFC 3339): the member's progress deadline runs from it.
	FleetRevisionTimeAnnotation = "pkgsync.dev/fleet-revision-time"
	// HoldAnnotation on a HostedCluster, or on its member Package, holds that one member: the
	// fleet leaves it on the revision it has (and writes nothing to it) until the annotation is
	// removed. Its value is the reason, shown in status.heldMembers and pkgsync fleet status.
	// Whoever may annotate HostedClusters (or write member Packages) may hold a cluster back
	// from a rollout: see docs/operations.md.
	HoldAnnotation = "pkgsync.dev/hold"
	// MaintenanceWindowsAnnotation on a HostedCluster gives the cluster maintenance windows of
	// its own, for every fleet's member on it: a member moves to another revision only while one
	// of them is open, and while its partition's windows (spec.rollout.windows) allow it too. Its
	// value is a JSON list of at most MaxClusterWindows windows in the syntax of
	// spec.rollout.windows without partitions, at most MaxClusterWindowsBytes long, such as
	// [{"schedule":"0 22 * * 6","duration":"4h","timeZone":"Europe/Berlin"}]. The exemptions are
	// those of spec.rollout.windows (FleetRolloutStrategy.Windows): drift correction, a new
	// cluster's first install and a rollback are not held. A member waiting for its cluster's
	// window is listed in status.windowHeldMembers (reason OutsideClusterWindow, with when the
	// next one opens); one whose cluster's annotation cannot be read is not moved either, and
	// is listed there with reason InvalidClusterWindows and what is wrong. Such a member stands
	// aside: the rollout completes without it, and once its window opens it catches up within
	// spec.rollout.maxUnavailable (clusters sharing one schedule do not all move in one pass);
	// a revision that completed while it waited has passed its canaries, but no
	// failureThreshold or rollback applies to the catch-up. Only the annotation
	// on the HostedCluster counts (not one on a member Package). Whoever may annotate
	// HostedClusters may freeze a cluster, as with HoldAnnotation: see docs/operations.md.
	MaintenanceWindowsAnnotation = "pkgsync.dev/maintenance-windows"
	// MaxClusterWindows is how many windows MaintenanceWindowsAnnotation may list, as many as
	// spec.rollout.windows.
	MaxClusterWindows = 16
	// MaxClusterWindowsBytes bounds the value of MaintenanceWindowsAnnotation: it is read at
	// every reconcile of every fleet that selects the cluster.
	MaxClusterWindowsBytes = 4096
	// ApprovePartitionPrefix, followed by a partition's name (a value of
	// spec.rollout.partitions.labelKey), is the key of the annotation on a HostedClusterPackage
	// that approves one revision for a partition spec.rollout.approvalRequired lists: its value is
	// the revision's name (status.target.name). An approval naming another revision does
	// nothing; the fleet removes it once the revision it names is rolled out completely (it
	// becomes status.stable), so the next revision waits again. Whoever may patch the
	// HostedClusterPackage may approve: see docs/fleet.md for the RBAC. `pkgsync fleet approve`
	// writes it.
	ApprovePartitionPrefix = "approve.pkgsync.dev/"

	// DefaultProgressDeadline is how long a member may take to become Ready on a new revision
	// before it counts as failed.
	DefaultProgressDeadline = 10 * time.Minute
)

// HostedClusterPackageSpec says which package goes to which hosted clusters, and how a new
// revision is rolled out across them.
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.semver)",message="spec.template.spec.semver is not supported by a HostedClusterPackage yet: name a tag in spec.template.spec.image; the fleet resolves it and pins every member to its digest"
type HostedClusterPackageSpec struct {
	// HostedClusterSelector selects the HyperShift HostedClusters (by their labels) that get a
	// member Package; empty selects every HostedCluster.
	// +optional
	HostedClusterSelector *metav1.LabelSelector `json:"hostedClusterSelector,omitempty"`

	// Template is the Package kept in the hosted-control-plane namespace of each selected
	// HostedCluster. Its image tag is resolved by the fleet, once per interval for the whole
	// fleet, and members are pinned to the digest of the revision their partition is on. With
	// template.spec.verify set, the fleet verifies a resolved digest before it becomes the
	// target (its verify.secretRef read in the controller's namespace): a digest that fails
	// reaches no member. The fleet has no verify of its own, so that it cannot disagree with
	// its members, which verify with the template's too.
	// +required
	Template PackageTemplate `json:"template"`

	// ConfigOverrides are merged, in order, over template.spec.config for the HostedClusters
	// each selects (objects merged key by key, anything else replaced), so that one fleet gives a
	// partition or a single cluster different values. A change is rolled out like a new image.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	ConfigOverrides []ConfigOverride `json:"configOverrides,omitempty"`

	// Rollout says how a new revision reaches the members.
	// +optional
	Rollout FleetRolloutStrategy `json:"rollout,omitempty"`

	// Suspend stops the fleet's own reconciliation: no tag is resolved, no member is created,
	// changed or removed. Members keep reconciling themselves.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// DeletionPolicy is what deleting the fleet does to its members, whatever the cascade of
	// `kubectl delete` (background, foreground or orphan). Delete (the default) deletes every
	// member, each tearing down what it installed, then the Secrets the fleet copied into their
	// namespaces. Orphan leaves them: the fleet takes its label and annotations
	// (pkgsync.dev/fleet-uid, the revision annotations) off each member Package and each copied
	// Secret, and each member goes on reconciling on its own, pinned to the digest it was on,
	// with the copied Secrets it pulls and verifies with. Members and copies are the fleet's by
	// its label and its UID (pkgsync.dev/fleet-uid); they have an ownerReference to the fleet
	// only with Delete, so that with Orphan no cascade can delete them. A change takes effect
	// at the fleet's next reconcile, which adds or removes the ownerReference on every member
	// and copy.
	// +optional
	// +kubebuilder:validation:Enum=Delete;Orphan
	// +kubebuilder:default=Delete
	DeletionPolicy FleetDeletionPolicy `json:"deletionPolicy,omitempty"`

	// DependsOn names other HostedClusterPackages whose members come first, cluster by cluster.
	// On each HostedCluster, this fleet's member is created, or moved to a revision it is not on
	// (the target, or the stable revision for a new cluster), only once, for every fleet named,
	// that fleet's own member on the same HostedCluster (in the same hosted-control-plane
	// namespace) exists, is not being deleted, carries that fleet's current revision in
	// pkgsync.dev/fleet-revision (its status.target; its status.stable while a rollback takes
	// the target back) and is Ready at its current generation. A fleet that does not exist (or
	// that this controller does not reconcile: another shard), is being deleted, has no target
	// yet, or has no member on that HostedCluster (it does not select it) is not ready. Until
	// then the member waits: it stays on the revision it has (none, if it has no member yet),
	// is listed in status.blockedMembers with reason DependencyNotReady naming each fleet and
	// why, counted in status.blocked and status.dependencies[].waiting (a member of a partition
	// the rollout has not reached is kept where it is as any there, and not counted), uses no maxUnavailable
	// budget, counts toward no failureThreshold and holds no other cluster's member back. A
	// member already on the revision it is to be on does not wait (a change of a dependency
	// never takes it back); during a rollback the members on the rejected revision go back to
	// the stable one without waiting (a new cluster still waits for its first install). A fleet whose dependencies lead back to itself
	// is refused: Ready=False, Stalled=True, reason DependencyCycle, naming the cycle
	// ("a → b → a"), and none of its members is written; a walk of more than 64 fleets is
	// refused (InvalidDependency). Teardown runs in reverse: a member this fleet removes (the
	// fleet is deleted with deletionPolicy Delete, or its HostedCluster is no longer selected) is
	// not deleted while a fleet that names this one (and that this one does not itself depend
	// on) still exists and still has its member on that HostedCluster; the fleet reports which
	// (Ready=False, reason Deleting, or an event) and is woken when that member goes. A fleet
	// being deleted waits so 10 minutes after its deletion at most, then deletes the member
	// anyway (a Warning event names the dependents).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	DependsOn []FleetDependency `json:"dependsOn,omitempty"`
}

// FleetDependency names a HostedClusterPackage; they are cluster-scoped, so by name only.
type FleetDependency struct {
	// Name of the HostedClusterPackage.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// FleetDependencyStatus is what a fleet reads of one fleet its spec.dependsOn names.
type FleetDependencyStatus struct {
	// Name of the fleet depended on.
	Name string `json:"name"`
	// Revision its members must be Ready on (its status.target, or its status.stable while a
	// rollback takes the target back); empty when it has none.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Waiting counts this fleet's members that wait for it: those the last reconcile would
	// have written to another revision (created or moved) and kept back, reason
	// DependencyNotReady; not members held or blocked for another reason.
	// +optional
	Waiting int32 `json:"waiting"`
	// Message says why every member waits for it, when the fleet itself is the reason (it does
	// not exist, is being deleted, has no target yet); empty otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// FleetDeletionPolicy is what deleting a fleet does to its members.
type FleetDeletionPolicy string

const (
	// FleetDeletionDelete deletes the members (and the Secrets copied for them) with the fleet.
	FleetDeletionDelete FleetDeletionPolicy = "Delete"
	// FleetDeletionOrphan leaves the members installed, managed by their own Packages.
	FleetDeletionOrphan FleetDeletionPolicy = "Orphan"
)

// GetDeletionPolicy returns what deleting the fleet does to its members, defaulted.
func (in *HostedClusterPackageSpec) GetDeletionPolicy() FleetDeletionPolicy {
	if in.DeletionPolicy == "" {
		return FleetDeletionDelete
	}
	return in.DeletionPolicy
}

// PackageTemplate is a member Package: its labels, annotations and spec.
type PackageTemplate struct {
	// Metadata of each member: labels and annotations.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty"`
	// Spec of each member Package. spec.image must name a tag (or a digest); the fleet pins
	// members to the digest it resolved.
	// +required
	Spec PackageSpec `json:"spec"`
}

// TemplateMetadata is the metadata a template gives its members.
type TemplateMetadata struct {
	// Labels of each member; the fleet adds pkgsync.dev/fleet.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations of each member; the fleet adds pkgsync.dev/fleet-revision.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ConfigOverride gives the HostedClusters its selector matches configuration values of their own.
type ConfigOverride struct {
	// HostedClusterSelector selects the HostedClusters (by their labels) the override applies to.
	// +required
	HostedClusterSelector metav1.LabelSelector `json:"hostedClusterSelector"`
	// Config is merged over template.spec.config (and earlier overrides).
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	Config *apiextensionsv1.JSON `json:"config"`
}

// HostedClusterPackage rolls one package out to every matching HyperShift hosted cluster: it
// keeps a member Package in each one's hosted-control-plane namespace and moves them to a new
// revision partition by partition.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name is at most 63 characters: the member Packages it writes are named after it, and the objects it applies carry it in the label pkgsync.dev/owner-name, whose values are at most 63"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=hcpkg,categories=pkgsync
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.target.version"
// +kubebuilder:printcolumn:name="Target",type="string",JSONPath=".status.target.name"
// +kubebuilder:printcolumn:name="Updated/Ready/Total",type="string",JSONPath=".status.progress"
// +kubebuilder:printcolumn:name="Partition",type="string",JSONPath=".status.currentPartition"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type HostedClusterPackage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HostedClusterPackageSpec `json:"spec"`
	// +kubebuilder:default={"observedGeneration":-1}
	Status HostedClusterPackageStatus `json:"status,omitempty"`
}

// HostedClusterPackageList is a list of HostedClusterPackages.
// +kubebuilder:object:root=true
type HostedClusterPackageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostedClusterPackage `json:"items"`
}

// GetConditions returns the status conditions, for github.com/fluxcd/pkg/runtime/conditions.
func (in *HostedClusterPackage) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *HostedClusterPackage) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetOnFailure returns what a halt does, defaulted.
func (in *FleetRolloutStrategy) GetOnFailure() FleetFailurePolicy {
	if in.OnFailure == "" {
		return FleetFailureHalt
	}
	return in.OnFailure
}

// GetProgressDeadline returns the progress deadline, defaulted.
func (in *FleetRolloutStrategy) GetProgressDeadline() time.Duration {
	if in.ProgressDeadline == nil || in.ProgressDeadline.Duration <= 0 {
		return DefaultProgressDeadline
	}
	return in.ProgressDeadline.Duration
}
