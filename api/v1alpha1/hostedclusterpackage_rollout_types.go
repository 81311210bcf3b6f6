package v1alpha1

// The rollout strategy of a HostedClusterPackage: partitions, windows, analysis, approvals.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

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
