package v1alpha1

// Condition reasons. The condition types are Flux's and kstatus's: Ready, Reconciling, Stalled
// (github.com/fluxcd/pkg/apis/meta).
const (
	// FinalizerName is the finalizer pkgsync puts on the resources it reconciles, to tear down
	// their objects before they go.
	FinalizerName = "pkgsync.dev/finalizer"

	// ReconciliationSucceededReason: every phase is complete.
	ReconciliationSucceededReason = "ReconciliationSucceeded"
	// ProgressingReason: reconciliation is under way.
	ProgressingReason = "Progressing"
	// ProgressingWithRetryReason: the last attempt failed and will be retried.
	ProgressingWithRetryReason = "ProgressingWithRetry"
	// PhaseProgressingReason: objects of a phase are not yet available.
	PhaseProgressingReason = "PhaseProgressing"
	// ObjectsFailedReason: an object of a phase reports that it failed (kstatus Failed: a
	// Deployment past its progressDeadlineSeconds, a Job out of retries), so waiting will not make
	// it available. Stalled, and looked at again every progress interval: Ready follows once the
	// object recovers.
	ObjectsFailedReason = "ObjectsFailed"
	// PullFailedReason: the image reference could not be resolved or pulled.
	PullFailedReason = "PullFailed"
	// NoMatchingVersionReason: spec.semver is set and no tag of the repository is a version the
	// range accepts; looked at again at the next interval.
	NoMatchingVersionReason = "NoMatchingVersion"
	// InvalidVersionRangeReason: spec.semver is not a version range.
	InvalidVersionRangeReason = "InvalidVersionRange"
	// VerificationFailedReason: spec.verify is set and the image's digest has no signature that
	// verifies with the keys given, or the keys cannot be read.
	VerificationFailedReason = "VerificationFailed"
	// VerificationRequiredReason: the controller requires signatures (--require-signatures) and
	// the resource has no spec.verify.
	VerificationRequiredReason = "VerificationRequired"
	// AuthenticationFailedReason: the registry refused the credentials or the pull secret is unusable.
	AuthenticationFailedReason = "AuthenticationFailed"
	// RenderFailedReason: the package is broken (manifest, templates, kustomize, phases).
	RenderFailedReason = "RenderFailed"
	// PlatformConstraintViolatedReason: the package's spec.constraints[].platform does not
	// include the cluster's platform; nothing is applied.
	PlatformConstraintViolatedReason = "PlatformConstraintViolated"
	// PlatformVersionConstraintViolatedReason: the cluster's Kubernetes or OpenShift version is
	// outside the package's spec.constraints[].platformVersion range; nothing is applied.
	PlatformVersionConstraintViolatedReason = "PlatformVersionConstraintViolated"
	// UniqueInScopeConstraintViolatedReason: the package allows one installation per namespace
	// (Packages) or per cluster (ClusterPackages) (spec.constraints[].uniqueInScope) and another
	// resource already installs it; nothing is applied.
	UniqueInScopeConstraintViolatedReason = "UniqueInScopeConstraintViolated"
	// InvalidConfigReason: spec.config does not satisfy the package's configuration schema.
	InvalidConfigReason = "InvalidConfig"
	// ConfigPrunedReason (a Warning event, not a condition): the configuration holds keys the
	// package's schema does not declare, dropped; the Package is not failed (status.warnings).
	ConfigPrunedReason = "ConfigPruned"
	// DependencyNotReadyReason: a dependency (spec.dependsOn) is missing or not Ready; nothing is
	// applied until it is.
	DependencyNotReadyReason = "DependencyNotReady"
	// DependencyCycleReason: spec.dependsOn leads back to the resource itself (stalls).
	DependencyCycleReason = "DependencyCycle"
	// InvalidDependencyReason: a dependency cannot be used: its readyExpr does not compile or
	// does not give a bool, it names a kind this resource may not depend on, or the chain of
	// dependencies is too deep (stalls).
	InvalidDependencyReason = "InvalidDependency"
	// ConfigSourceNotFoundReason: a ConfigMap or Secret of spec.configFrom, or its key, is missing
	// and the entry is not optional; nothing is applied until it appears.
	ConfigSourceNotFoundReason = "ConfigSourceNotFound"
	// InvalidConfigSourceReason: a key of spec.configFrom does not hold a YAML or JSON object,
	// or the data read are over the bound.
	InvalidConfigSourceReason = "InvalidConfigSource"
	// CollisionReason: an object exists and is not owned by this resource.
	CollisionReason = "Collision"
	// ConflictReason: another field manager owns a field the package sets.
	ConflictReason = "Conflict"
	// ImmutableFieldReason: the package changes a field the API server does not allow to change.
	ImmutableFieldReason = "ImmutableField"
	// ScopeViolationReason: a namespaced resource would create cluster-scoped objects or objects in
	// other namespaces, which the controller does not allow.
	ScopeViolationReason = "ScopeViolation"
	// ApplyFailedReason: the API server refused an object.
	ApplyFailedReason = "ApplyFailed"
	// ForbiddenReason: the API server refused a request as forbidden: the impersonated
	// ServiceAccount (spec.serviceAccountName, or the controller's own) may not do what the
	// package needs, or does not exist.
	ForbiddenReason = "Forbidden"
	// HostedClusterUnavailableReason: hosted-cluster phases cannot reach the hosted API server
	// (in a fleet's status.blockedMembers also: the member's HostedCluster is not Available).
	HostedClusterUnavailableReason = "HostedClusterUnavailable"
	// InsecureKubeconfigReason: the hosted cluster's connector kubeconfig holds something the
	// controller refuses to use (file references, exec or auth-provider plugins, a proxy, or
	// disabled TLS verification without --insecure-kubeconfig-tls).
	InsecureKubeconfigReason = "InsecureKubeconfig"
	// NotHostedControlPlaneReason: the package has hosted-cluster phases, but the resource's
	// namespace is not a hosted-control-plane namespace; nothing is applied.
	NotHostedControlPlaneReason = "NotHostedControlPlane"
	// ObjectsLeftReason (events only): deletion let objects go without deleting them, because
	// their cluster cannot be reached, their namespace is being deleted, or the resource's
	// namespace is not a hosted-control-plane namespace.
	ObjectsLeftReason = "ObjectsLeft"
	// DeletingReason: the resource is being deleted and its objects torn down (a fleet: its
	// members deleted).
	DeletingReason = "Deleting"
)

// Reasons of a HostedClusterPackage (fleet): its conditions, its events and its
// status.failedMembers.
const (
	// RolloutProgressingReason: members are being moved to the target revision.
	RolloutProgressingReason = "RolloutProgressing"
	// RolloutHaltedReason: more members failed than spec.rollout.failureThreshold allows.
	RolloutHaltedReason = "RolloutHalted"
	// RolloutPausedReason: spec.rollout.paused holds a rollout that is not finished.
	RolloutPausedReason = "RolloutPaused"
	// AwaitingApprovalReason: the rollout reached a partition spec.rollout.approvalRequired
	// lists, and waits for an approval of the target revision (approve.pkgsync.dev/<partition>).
	// Also the event emitted when the wait starts.
	AwaitingApprovalReason = "AwaitingApproval"
	// ApprovalGivenReason (events only): an approval let a partition waiting for one start.
	ApprovalGivenReason = "ApprovalGiven"
	// PreflightFailedReason: spec.rollout.preflight found members for which the target
	// revision does not render or validate; no member is moved to it.
	PreflightFailedReason = "PreflightFailed"
	// RollingBackReason: the rollout halted and spec.rollout.onFailure is Rollback: members on
	// the rejected revision are moved back to the stable revision.
	RollingBackReason = "RollingBack"
	// RolledBackReason: the rejected revision is off every member that may move; the fleet
	// waits for the tag to resolve to another digest, or for a reconcile request.
	RolledBackReason = "RolledBack"
	// MembersFailedReason: members could not be written, or collide with Packages that are
	// not the fleet's.
	MembersFailedReason = "MembersFailed"
	// InvalidSpecReason: the spec cannot be acted on (a selector the API server let through).
	InvalidSpecReason = "InvalidSpec"
	// HostedClusterAPIMissingReason: the HostedCluster API is not installed.
	HostedClusterAPIMissingReason = "HostedClusterAPIMissing"

	// MemberNotCreatedReason (status.inProgress, status.failedMembers): no member Package yet.
	MemberNotCreatedReason = "NotCreated"
	// NamespaceNotFoundReason (status.failedMembers): the member's namespace does not exist.
	NamespaceNotFoundReason = "NamespaceNotFound"
	// MemberWriteFailedReason (status.failedMembers): the API server refused the member.
	MemberWriteFailedReason = "MemberWriteFailed"
	// SecretCollisionReason (status.failedMembers): a Secret the template names exists in the
	// member's namespace and is not the fleet's copy; it is left as it is.
	SecretCollisionReason = "SecretCollision"
	// SecretCopyFailedReason (status.failedMembers): the API server refused the fleet's copy of
	// a Secret in the member's namespace.
	SecretCopyFailedReason = "SecretCopyFailed"
	// HostedClusterPausedReason (status.blockedMembers): the member's HostedCluster is paused
	// (ReconciliationActive=False, or spec.pausedUntil "true" or a time still to come).
	HostedClusterPausedReason = "HostedClusterPaused"
	// MemberHeldReason (status.heldMembers): the pkgsync.dev/hold annotation holds the member.
	MemberHeldReason = "Held"
	// OutsideClusterWindowReason (status.windowHeldMembers, and an event when a member starts
	// waiting): none of the maintenance windows the member's HostedCluster names in its
	// pkgsync.dev/maintenance-windows annotation is open, so the member is not moved to another
	// revision until one opens (status.windowHeldMembers[].opensAt).
	OutsideClusterWindowReason = "OutsideClusterWindow"
	// InvalidClusterWindowsReason (status.windowHeldMembers, and a Warning event): the member's
	// HostedCluster has a pkgsync.dev/maintenance-windows annotation that cannot be read. The
	// member is not moved to another revision until it is fixed or removed: a cluster that asked
	// for a freeze is not updated because of a typo.
	InvalidClusterWindowsReason = "InvalidClusterWindows"

	// PartitionStartedReason (events only): the rollout reached a partition.
	PartitionStartedReason = "PartitionStarted"
	// PartitionCompleteReason (events only): every member of a partition is Ready on the target.
	PartitionCompleteReason = "PartitionComplete"
	// RolloutResumedReason (events only): a halted partition rolls out again.
	RolloutResumedReason = "RolloutResumed"
	// AnalysisFailedReason: a check of spec.rollout.analysis failed the member (a failed member,
	// in status.failedMembers) or, as an event, failed members of a partition.
	AnalysisFailedReason = "AnalysisFailed"
)
