package v1alpha1

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	// is listed there with reason InvalidClusterWindows and what is wrong. Only the annotation
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
	// why, counted in status.blocked and status.dependencies[].waiting, uses no maxUnavailable
	// budget, counts toward no failureThreshold and holds no other cluster's member back. A
	// member already on the revision it is to be on does not wait (a change of a dependency
	// never takes it back), nor does a rollback. A fleet whose dependencies lead back to itself
	// is refused: Ready=False, Stalled=True, reason DependencyCycle, naming the cycle
	// ("a → b → a"), and none of its members is written; a walk of more than 64 fleets is
	// refused (InvalidDependency). Teardown runs in reverse: a member this fleet removes (the
	// fleet is deleted with deletionPolicy Delete, or its HostedCluster is no longer selected) is
	// not deleted while a fleet that names this one (and that this one does not itself depend
	// on) still exists and still has its member on that HostedCluster; the fleet reports which
	// (Ready=False, reason Deleting, or an event) and is woken when that member goes.
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
	// Waiting counts this fleet's members that wait for it.
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

// FleetRolloutStrategy is how a new revision is rolled out: partition after partition, within a
// partition at most MaxUnavailable members at a time, halting when too many fail.
// +kubebuilder:validation:XValidation:rule="!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? self.maxUnavailable >= 1 : self.maxUnavailable.matches('^([1-9][0-9]?|100)%$'))",message="spec.rollout.maxUnavailable must be a count of at least 1 or a percentage from 1% to 100%"
// +kubebuilder:validation:XValidation:rule="!has(self.failureThreshold) || (type(self.failureThreshold) == int ? self.failureThreshold >= 1 : self.failureThreshold.matches('^([1-9][0-9]?|100)%$'))",message="spec.rollout.failureThreshold must be a count of at least 1 or a percentage from 1% to 100%"
type FleetRolloutStrategy struct {
	// MaxUnavailable is how many members of the partition in progress may be unavailable (being
	// updated, or not Ready) at once: a count or a percentage of the partition's members
	// (rounded down, at least 1). Default 1. Blocked and held members are not counted.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// Partitions splits the HostedClusters by a label into groups rolled out one after another.
	// Without it, all members form one partition.
	// +optional
	Partitions *FleetPartitions `json:"partitions,omitempty"`

	// Soak is how long every member of a partition must stay Ready on the new revision before
	// the next partition starts. A member that stops being Ready restarts the soak.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Soak *metav1.Duration `json:"soak,omitempty"`

	// FailureThreshold is how many members of the partition in progress may fail on the new
	// revision before the rollout halts (a count or a percentage of the partition, rounded up,
	// at least 1). Default 1: the first failure halts. A halted rollout touches no further
	// member; it resumes when the failed members become Ready or the target revision changes.
	// +optional
	// +kubebuilder:validation:XIntOrString
	FailureThreshold *intstr.IntOrString `json:"failureThreshold,omitempty"`

	// ProgressDeadline is how long a member may take to become Ready on a new revision before it
	// counts as failed. A member that is Stalled (an invalid package or configuration) fails at
	// once; other errors (a registry that does not answer, an object never Ready) count once
	// the deadline has passed. A blocked member (status.blockedMembers: its cluster or
	// namespace stops it) never counts. Default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// Paused holds the rollout where it is: no member moves to another revision (new
	// HostedClusters get a member on the stable revision, none when there is none yet), while
	// existing members keep reconciling and drift is still corrected.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// OnFailure is what a halt does. Halt (the default) leaves every member where it is until
	// the failed members become Ready or the target revision changes. Rollback rejects the
	// target (status.rejected names its digest and why) and moves every member on it back to
	// the stable revision, within maxUnavailable in each partition; the digest is not rolled
	// out again until the tag resolves to another digest or a reconcile is requested
	// (reconcile.fluxcd.io/requestedAt). Held members stay where they are; blocked members on
	// the rejected revision move back once unblocked. Without a stable revision (the first
	// rollout) there is nothing to go back to: Rollback halts as Halt does.
	// +optional
	// +kubebuilder:validation:Enum=Halt;Rollback
	// +kubebuilder:default=Halt
	OnFailure FleetFailurePolicy `json:"onFailure,omitempty"`

	// Preflight renders the target revision for every member's environment (its
	// HostedCluster's labels and annotations, its config overrides) before any member is moved
	// to it, as the member would render it, and validates the result. When one fails, the
	// rollout halts before it starts (Ready=False, Stalled=True, reason PreflightFailed, the
	// failing members named): no member moves, new clusters get the stable revision. A member
	// that joins later is checked before it is moved too. The result is kept per revision and
	// member environment, so a reconcile repeats no render. The check is local: nothing is sent
	// to the API servers (`pkgsync fleet plan` adds a server-side dry run).
	// +optional
	Preflight bool `json:"preflight,omitempty"`

	// Windows are maintenance windows: a member is moved to another revision only while a
	// window that applies to its partition is open. A window without partitions applies to
	// every partition; one with partitions only to those; a partition no window applies to
	// moves at any time, and so does every partition when there are no windows. A window that
	// closes while a partition is progressing lets the members already moved finish (they
	// count toward soak and failureThreshold as usual) and moves no new one. Windows do not
	// hold drift correction (a member's spec is kept on its revision at any time), a new
	// cluster's first install (on the stable revision, or the target when the rollout has
	// reached its partition), or a rollback (onFailure: Rollback). A HostedCluster may have
	// windows of its own too (the pkgsync.dev/maintenance-windows annotation): its members then
	// move only while both allow it.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Windows []FleetWindow `json:"windows,omitempty"`

	// Analysis checks a partition while it soaks: its checks are evaluated every interval
	// from the moment the partition's members are all Ready on the target until its soak has
	// passed, and the next partition starts only once every check has passed in an evaluation
	// after the soak began. A member a check fails counts as a failed member against
	// failureThreshold (reason AnalysisFailed), so that enough of them halt the rollout or roll
	// it back (onFailure). status.analysis holds each check's last result.
	// +optional
	Analysis *FleetAnalysis `json:"analysis,omitempty"`

	// ApprovalRequired lists partitions (values of spec.rollout.partitions.labelKey) that a new
	// revision reaches only once approved: when the rollout reaches such a partition (every
	// earlier one complete, soaked), it waits in state AwaitingApproval, the fleet Ready=False
	// with reason AwaitingApproval, no member of it or of a later partition moved, until the
	// annotation approve.pkgsync.dev/<partition> on the HostedClusterPackage names the target
	// revision (status.target.name; `pkgsync fleet approve`). An approval naming another
	// revision does nothing; once the approved revision is rolled out completely, the fleet
	// removes the approval. A partition that has members on the target already goes on
	// without one (an approval withdrawn mid-way does not stop it). The gate holds neither a
	// rollback, nor drift correction, nor a new cluster's first install on the stable
	// revision. The unlabelled partition cannot be listed: an annotation key cannot name it.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern="^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
	// +listType=set
	ApprovalRequired []string `json:"approvalRequired,omitempty"`
}

// FleetAnalysis is spec.rollout.analysis.
type FleetAnalysis struct {
	// Interval between evaluations during a soak. Default 30s; at least 5s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Checks evaluated at each evaluation.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Checks []FleetCheck `json:"checks"`
	// OnInconclusive is what a check that cannot be evaluated does (a query that errs, times
	// out or returns no sample; a CEL error): Wait (the default) keeps the partition soaking
	// until an evaluation is conclusive, Fail counts it as failed for the members it is about,
	// Pass lets it through.
	// +optional
	// +kubebuilder:validation:Enum=Wait;Fail;Pass
	// +kubebuilder:default=Wait
	OnInconclusive FleetInconclusivePolicy `json:"onInconclusive,omitempty"`
}

// FleetInconclusivePolicy is spec.rollout.analysis.onInconclusive.
type FleetInconclusivePolicy string

const (
	// FleetInconclusiveWait keeps the partition soaking.
	FleetInconclusiveWait FleetInconclusivePolicy = "Wait"
	// FleetInconclusiveFail counts the check as failed.
	FleetInconclusiveFail FleetInconclusivePolicy = "Fail"
	// FleetInconclusivePass lets the check through.
	FleetInconclusivePass FleetInconclusivePolicy = "Pass"
)

// FleetCheck is one check of spec.rollout.analysis: exactly one of cel and query.
// +kubebuilder:validation:XValidation:rule="has(self.cel) != has(self.query)",message="a check has exactly one of cel and query"
type FleetCheck struct {
	// Name of the check, as status.analysis and events name it.
	// +required
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// CEL is an expression that must be true for every member of the soaking partition. It sees
	// `member` (the member Package: metadata's name, namespace, labels and annotations, and
	// status: observedGeneration, conditions with their reasons and messages, the applied
	// revision and version) and `cluster` (its HostedCluster: name, namespace, labels,
	// annotations, available). Bounded as spec.dependsOn's readyExpr is: 1024 characters and
	// a cost limit per evaluation.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	CEL string `json:"cel,omitempty"`
	// Query is a Prometheus query evaluated against the controller's
	// --analysis-prometheus-address (the operator's, never a tenant's).
	// +optional
	Query *FleetMetricQuery `json:"query,omitempty"`
}

// FleetMetricQuery is a PromQL instant query and the range its values must lie in.
// +kubebuilder:validation:XValidation:rule="has(self.max) || has(self.min)",message="a query needs max, min or both"
type FleetMetricQuery struct {
	// PromQL is the query, evaluated as an instant query. A sample whose memberLabel names a
	// member's hosted-control-plane namespace speaks for that member; a sample without it (a
	// scalar, an aggregate) speaks for every member of the soaking partition. A sample for a
	// namespace outside the partition is ignored.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	PromQL string `json:"promql"`
	// MemberLabel is the sample label that holds a member's namespace. Default "namespace".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	MemberLabel string `json:"memberLabel,omitempty"`
	// Max is the largest value that passes, a decimal number such as "0.05".
	// +optional
	// +kubebuilder:validation:Pattern="^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"
	Max *string `json:"max,omitempty"`
	// Min is the smallest value that passes.
	// +optional
	// +kubebuilder:validation:Pattern="^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"
	Min *string `json:"min,omitempty"`
}

// FleetCheckResult is a check's verdict.
type FleetCheckResult string

const (
	FleetCheckPassed       FleetCheckResult = "Passed"
	FleetCheckFailed       FleetCheckResult = "Failed"
	FleetCheckInconclusive FleetCheckResult = "Inconclusive"
)

// FleetCheckStatus is the last evaluation of one analysis check.
type FleetCheckStatus struct {
	// Name of the check.
	Name string `json:"name"`
	// Partition it was evaluated for.
	Partition string `json:"partition"`
	// Revision (the target's name) it was evaluated for.
	Revision string `json:"revision"`
	// Result: Passed, Failed or Inconclusive.
	Result FleetCheckResult `json:"result"`
	// Value is the query's worst value, or for a CEL check how many members it failed.
	// +optional
	Value string `json:"value,omitempty"`
	// Message says which members failed and why, or why the check is inconclusive.
	// +optional
	Message string `json:"message,omitempty"`
	// EvaluatedAt is when it was evaluated.
	EvaluatedAt metav1.Time `json:"evaluatedAt"`
	// Since is when the partition's current soak began, as the evaluation saw it: a pass
	// counts toward the next partition only for the soak it was evaluated in.
	Since metav1.Time `json:"since"`
}

// FleetWindow is a maintenance window: it opens at every time its schedule names and stays
// open for its duration.
type FleetWindow struct {
	// Schedule is a cron schedule of five fields (minute hour day-of-month month day-of-week,
	// as crontab(5) has them, "@daily" and the like included) naming when the window opens.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open once opened.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Duration metav1.Duration `json:"duration"`
	// TimeZone the schedule is read in: an IANA name such as Europe/Berlin. Default UTC.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
	// Partitions the window applies to (values of spec.rollout.partitions.labelKey; "" for
	// clusters without the label). Empty: every partition.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	Partitions []string `json:"partitions,omitempty"`
}

// FleetWindowStatus says whether the maintenance windows of a partition are open.
type FleetWindowStatus struct {
	// Open: a window that applies to the partition is open now.
	Open bool `json:"open"`
	// OpensAt is when the next window opens (unset while one is open).
	// +optional
	OpensAt *metav1.Time `json:"opensAt,omitempty"`
	// ClosesAt is when the open window closes (unset while none is open).
	// +optional
	ClosesAt *metav1.Time `json:"closesAt,omitempty"`
}

// FleetFailurePolicy is what a fleet does when its rollout halts.
type FleetFailurePolicy string

const (
	// FleetFailureHalt leaves members where they are.
	FleetFailureHalt FleetFailurePolicy = "Halt"
	// FleetFailureRollback moves the members on the failed target back to the stable revision.
	FleetFailureRollback FleetFailurePolicy = "Rollback"
)

// FleetPartitions groups HostedClusters by the value of one label.
// +kubebuilder:validation:XValidation:rule="!(has(self.order) && has(self.order.static) && has(self.order.alphanumeric))",message="spec.rollout.partitions.order takes either static or alphanumeric, not both"
type FleetPartitions struct {
	// LabelKey is the HostedCluster label whose value names a cluster's partition. Clusters
	// without the label form the last partition.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	LabelKey string `json:"labelKey"`
	// Order of the partitions. Default: alphanumeric.
	// +optional
	Order *PartitionOrder `json:"order,omitempty"`
}

// PartitionOrder orders partitions.
type PartitionOrder struct {
	// Static lists label values in rollout order; "*" stands for every value not listed
	// (alphanumerically among themselves). Values neither listed nor covered by "*" come after
	// the listed ones, alphanumerically.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	Static []string `json:"static,omitempty"`
	// Alphanumeric orders partitions by label value, numbers by value ("2" before "10").
	// +optional
	Alphanumeric *AlphanumericOrder `json:"alphanumeric,omitempty"`
}

// AlphanumericOrder orders by label value, numbers by value.
type AlphanumericOrder struct{}

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
