package v1alpha1

// What a HostedClusterPackage reports: revisions, partitions, members.

import (
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FleetRevision is one revision of a fleet: the image digest and the template it was made from.
type FleetRevision struct {
	// Name is short and unique per revision: 12 hexadecimal digits of the digest, a dash, 8 of
	// the template's sha256.
	Name string `json:"name"`
	// Image is the template's image pinned to the digest (repository:tag@sha256:...).
	Image string `json:"image"`
	// Digest of the image.
	Digest string `json:"digest"`
	// TemplateDigest is the sha256 of the template and config overrides it was made from.
	TemplateDigest string `json:"templateDigest"`
	// Version of the image as a user knows it: the org.opencontainers.image.version annotation
	// of its manifest (pkgsync build --version), as the first member on the digest reported it
	// (its status.lastAttemptedVersion: the fleet itself only resolves the tag, it pulls
	// nothing). Empty until a member has pulled the digest, and when the image declares no
	// version fit to show (see Package status.lastAttemptedVersion).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
}

// FleetStableRevision is the last revision rolled out completely, with what members on it need.
type FleetStableRevision struct {
	FleetRevision `json:",inline"`
	// Template the members on this revision are kept at.
	Template PackageTemplate `json:"template"`
	// ConfigOverrides of this revision.
	// +optional
	ConfigOverrides []ConfigOverride `json:"configOverrides,omitempty"`
}

// FleetRejectedRevision is a revision a rollback rejected: it is not rolled out again until the
// tag resolves to another digest or a reconcile is requested.
type FleetRejectedRevision struct {
	FleetRevision `json:",inline"`
	// Reason is the reason of the halt (RolloutHalted).
	Reason string `json:"reason"`
	// Message says which members failed in which partition, and why.
	// +optional
	Message string `json:"message,omitempty"`
	// RejectedAt is when the rollout halted and the revision was rejected.
	RejectedAt metav1.Time `json:"rejectedAt"`
}

// PartitionState is where a partition stands in the rollout of the target revision.
type PartitionState string

const (
	// PartitionPending: an earlier partition is not finished.
	PartitionPending PartitionState = "Pending"
	// PartitionProgressing: members are being moved to the target revision.
	PartitionProgressing PartitionState = "Progressing"
	// PartitionSoaking: every member is Ready on the target; the soak runs.
	PartitionSoaking PartitionState = "Soaking"
	// PartitionHalted: too many members failed; nothing more is touched.
	PartitionHalted PartitionState = "Halted"
	// PartitionComplete: every member is Ready on the target revision (and soaked).
	PartitionComplete PartitionState = "Complete"
	// PartitionAwaitingApproval: every earlier partition is complete, and the partition waits
	// for an approval of the target revision (spec.rollout.approvalRequired).
	PartitionAwaitingApproval PartitionState = "AwaitingApproval"
	// PartitionRollingBack: the rejected revision (status.rejected) is being taken off the
	// partition's members.
	PartitionRollingBack PartitionState = "RollingBack"
	// PartitionRolledBack: no member of the partition that may move is on the rejected revision.
	PartitionRolledBack PartitionState = "RolledBack"
)

// MemberCounts counts members.
type MemberCounts struct {
	// Total members.
	// +optional
	Total int32 `json:"total"`
	// Updated members: on the target revision.
	// +optional
	Updated int32 `json:"updated"`
	// Ready members: Ready on the revision they are on.
	// +optional
	Ready int32 `json:"ready"`
	// Failed members: failed on the target revision (blocked and held members never count).
	// +optional
	Failed int32 `json:"failed"`
	// Blocked members: ones that cannot move for a reason of their own cluster or namespace
	// (see status.blockedMembers). They use no maxUnavailable budget, count toward no
	// failureThreshold and hold no partition back.
	// +optional
	Blocked int32 `json:"blocked,omitempty"`
	// Held members: ones the pkgsync.dev/hold annotation keeps where they are.
	// +optional
	Held int32 `json:"held,omitempty"`
	// WindowHeld members: ones that wait for a maintenance window of their HostedCluster (the
	// pkgsync.dev/maintenance-windows annotation) to move to another revision, or whose
	// cluster's annotation cannot be read (see status.windowHeldMembers). Like held members,
	// they use no maxUnavailable budget, count toward no failureThreshold and hold no partition
	// back, except that a partition whose members are all blocked or window-held does not wave
	// a revision through untested.
	// +optional
	WindowHeld int32 `json:"windowHeld,omitempty"`
}

// PartitionStatus reports one partition.
type PartitionStatus struct {
	// Name is the label value, or "" for clusters without the label (all clusters without partitions).
	Name         string `json:"name"`
	MemberCounts `json:",inline"`
	// State of the partition in the rollout of the target revision.
	State PartitionState `json:"state"`
	// LastTransitionTime is when State last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	// StartedAt is when the rollout of the target revision reached this partition; unset while
	// it is Pending.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// Window is whether the maintenance windows that apply to the partition are open, and when
	// they open or close next; unset when none applies (spec.rollout.windows).
	// +optional
	Window *FleetWindowStatus `json:"window,omitempty"`
}

// MemberStatus names a member and what it is doing.
type MemberStatus struct {
	// Namespace of the member Package (the hosted-control-plane namespace).
	Namespace string `json:"namespace"`
	// Partition of its HostedCluster.
	// +optional
	Partition string `json:"partition,omitempty"`
	// Reason and message of its Ready condition, or why it has no member.
	Reason string `json:"reason"`
	// +optional
	Message string `json:"message,omitempty"`
}

// HostedClusterPackageStatus is the observed state of a fleet.
type HostedClusterPackageStatus struct {
	meta.ReconcileRequestStatus `json:",inline"`

	// ObservedGeneration is the last generation reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Target is the revision being rolled out (or rolled out, when equal to Stable).
	// +optional
	Target *FleetRevision `json:"target,omitempty"`
	// Stable is the last revision every member reached; members the rollout has not reached
	// stay on it.
	// +optional
	Stable *FleetStableRevision `json:"stable,omitempty"`
	// TargetAppliedFrom lists the registries and repositories (REGISTRY/REPOSITORY) that served
	// the target revision to the members that applied it, when not the one the template's image
	// names: a mirror (ImageDigestMirrorSet, ImageTagMirrorSet, the member's HostedCluster's
	// spec.imageContentSources) or the controller's registry overrides, as each member's
	// status.lastAppliedFrom says. Sorted, at most 10; empty when every member read the target
	// where the image names it.
	// +optional
	TargetAppliedFrom []string `json:"targetAppliedFrom,omitempty"`
	// Rejected is the revision spec.rollout.onFailure=Rollback took back after its rollout
	// halted: members on it return to the stable revision, and its digest is not rolled out
	// again until the tag resolves to another digest or a reconcile is requested.
	// +optional
	Rejected *FleetRejectedRevision `json:"rejected,omitempty"`

	// MemberCounts over the whole fleet.
	MemberCounts `json:",inline"`
	// Progress is "updated/ready/total", for kubectl's columns.
	// +optional
	Progress string `json:"progress,omitempty"`
	// CurrentPartition is the partition being rolled out, empty when none is.
	// +optional
	CurrentPartition string `json:"currentPartition,omitempty"`
	// Partitions in rollout order.
	// +optional
	Partitions []PartitionStatus `json:"partitions,omitempty"`
	// InProgress lists members moving to the target revision and not Ready yet (at most 10).
	// +optional
	InProgress []MemberStatus `json:"inProgress,omitempty"`
	// Failed lists failed members and members the fleet cannot keep (at most 10).
	// +optional
	FailedMembers []MemberStatus `json:"failedMembers,omitempty"`

	// Analysis holds the last result of each check of spec.rollout.analysis.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Analysis []FleetCheckStatus `json:"analysis,omitempty"`
	// BlockedMembers lists members that cannot move for a reason of their own cluster or
	// namespace, with that reason (at most 10; status.blocked counts them all): the
	// HostedCluster is not Available (HostedClusterUnavailable) or paused (HostedClusterPaused),
	// or the member itself reports HostedClusterUnavailable, AuthenticationFailed,
	// VerificationFailed, InsecureKubeconfig, NotHostedControlPlane, Forbidden or
	// DependencyNotReady, or it waits for a fleet spec.dependsOn names (DependencyNotReady,
	// naming the fleet). A blocked member stays on the revision it has and moves under the
	// normal rules once unblocked.
	// +optional
	BlockedMembers []MemberStatus `json:"blockedMembers,omitempty"`
	// Dependencies reports each fleet spec.dependsOn names, in its order: the revision its
	// members must be Ready on and how many of this fleet's members wait for it.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Dependencies []FleetDependencyStatus `json:"dependencies,omitempty"`
	// HeldMembers lists members held by the pkgsync.dev/hold annotation (reason Held, the
	// annotation's value in the message; at most 10; status.held counts them all).
	// +optional
	HeldMembers []MemberStatus `json:"heldMembers,omitempty"`
	// WindowHeldMembers lists members that wait for a maintenance window of their HostedCluster
	// (the pkgsync.dev/maintenance-windows annotation) before they move to another revision:
	// reason OutsideClusterWindow, with when the cluster's next window opens, or
	// InvalidClusterWindows when the annotation cannot be read (the message says what is wrong;
	// the member does not move until it is fixed or removed). At most 10; status.windowHeld
	// counts them all. Apart from the partitions' own windows (status.partitions[].window).
	// +optional
	WindowHeldMembers []WindowHeldMemberStatus `json:"windowHeldMembers,omitempty"`
}

// WindowHeldMemberStatus is a member that waits for its HostedCluster's maintenance windows.
type WindowHeldMemberStatus struct {
	MemberStatus `json:",inline"`
	// OpensAt is when the next of the cluster's windows opens: the member may move from then
	// on. Unset when the annotation cannot be read, or when no window of it opens again.
	// +optional
	OpensAt *metav1.Time `json:"opensAt,omitempty"`
}
