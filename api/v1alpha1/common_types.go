package v1alpha1

import (
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdoptionPolicy says what to do with an object that already exists and is not owned by this resource.
// +kubebuilder:validation:Enum=Never;Always
type AdoptionPolicy string

const (
	// AdoptNever refuses to touch such objects and reports a Collision (the default).
	AdoptNever AdoptionPolicy = "Never"
	// AdoptAlways takes such objects over.
	AdoptAlways AdoptionPolicy = "Always"
)

// PhaseState is where a phase stands in an apply pass.
type PhaseState string

const (
	// PhasePending: an earlier phase is not complete yet.
	PhasePending PhaseState = "Pending"
	// PhaseProgressing: objects are applied and not all of them are available yet.
	PhaseProgressing PhaseState = "Progressing"
	// PhaseComplete: every object of the phase is available.
	PhaseComplete PhaseState = "Complete"
)

// PhaseStatus reports one phase of the last apply pass.
type PhaseStatus struct {
	// Name of the phase.
	Name string `json:"name"`
	// Class of the phase: empty for the management cluster, hosted-cluster for the hosted cluster.
	// +optional
	Class string `json:"class,omitempty"`
	// State of the phase.
	State PhaseState `json:"state"`
	// NotAvailable lists objects that are not available yet, with the reason (at most 10).
	// +optional
	NotAvailable []ObjectStatus `json:"notAvailable,omitempty"`
}

// ObjectStatus names an object and why it is not available.
type ObjectStatus struct {
	// Object names the object as Kind.group namespace/name, for example
	// "Deployment.apps clusters-a/operator"; core kinds have no group ("ConfigMap ns/name") and
	// cluster-scoped objects no namespace ("Namespace addon").
	Object string `json:"object"`
	// Reason it is not available.
	Reason string `json:"reason"`
}

// Inventory records what pkgsync applied, per phase, so that objects that leave a package are
// pruned and teardown runs in reverse phase order even when the package can no longer be pulled.
type Inventory struct {
	// Phases in the order they are applied.
	// +optional
	Phases []InventoryPhase `json:"phases,omitempty"`
}

// InventoryPhase is the set of objects one phase applied.
type InventoryPhase struct {
	// Name of the phase.
	Name string `json:"name"`
	// Class of the phase.
	// +optional
	Class string `json:"class,omitempty"`
	// Groups holds the phase's objects in the order the phase holds them, each run of objects
	// of one kind in one namespace as one group.
	// +optional
	Groups []InventoryGroup `json:"groups,omitempty"`
	// Objects as group/version/kind/namespace/name, one string per object: how earlier
	// versions of pkgsync recorded them. Still read; the next status write records them as
	// groups.
	// +optional
	Objects []string `json:"objects,omitempty"`
	// Jobs records, for the Jobs of the phase that ran, the desired state each ran in and how it
	// finished, in the order the phase holds them. A Job gone while the package desires the same
	// Job (deleted by Kubernetes' TTL-after-finished controller, or by anyone) is not created
	// again when a reconcile read it finished, or when it has a ttlSecondsAfterFinished: see
	// "Jobs" in docs/package-format.md.
	// +optional
	Jobs []InventoryJob `json:"jobs,omitempty"`
}

// InventoryJob records that a Job of a phase ran in a desired state.
type InventoryJob struct {
	// Namespace of the Job.
	Namespace string `json:"namespace"`
	// Name of the Job.
	Name string `json:"name"`
	// DesiredHash is the pkgsync.dev/desired-hash of the Job that ran: the digest of the Job as
	// the package desired it.
	DesiredHash string `json:"desiredHash"`
	// Outcome is how the Job finished, as its conditions said when a reconcile last read it;
	// empty while it had not finished (or before a reconcile read it finished).
	// +optional
	Outcome JobOutcome `json:"outcome,omitempty"`
}

// JobOutcome is how a Job finished.
// +kubebuilder:validation:Enum=Complete;Failed
type JobOutcome string

const (
	// JobComplete: the Job's Complete condition was True.
	JobComplete JobOutcome = "Complete"
	// JobFailed: the Job's Failed condition was True.
	JobFailed JobOutcome = "Failed"
)

// InventoryGroup is objects of one kind in one namespace. The kind and namespace are recorded
// once, not per object, which keeps the inventory of a package of thousands of objects far below
// the size limit of an object.
type InventoryGroup struct {
	// Group of the objects' kind; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// Version of the objects' kind.
	Version string `json:"version"`
	// Kind of the objects.
	Kind string `json:"kind"`
	// Namespace of the objects; empty for cluster-scoped kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Names of the objects.
	Names []string `json:"names"`
}

// RevisionHistoryEntry records a revision that was applied completely.
type RevisionHistoryEntry struct {
	// Revision is the image digest (or, for ObjectDeployments, the generation).
	Revision string `json:"revision"`
	// ConfigDigest is the sha256 of the configuration it was rendered with.
	// +optional
	ConfigDigest string `json:"configDigest,omitempty"`
	// AppliedAt is when the revision became complete.
	AppliedAt metav1.Time `json:"appliedAt"`
}

// ApplyStatus is the status of the kinds that apply objects: Package, ClusterPackage,
// ObjectDeployment and ClusterObjectDeployment.
type ApplyStatus struct {
	meta.ReconcileRequestStatus `json:",inline"`

	// ObservedGeneration is the last generation whose outcome is final (Ready or Stalled); -1
	// before the first.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, plus the conditions of applied objects that the
	// package maps (package-operator.run/condition-map), whose types have a domain prefix.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase is the name of the phase the last pass waits on, or Complete.
	// +optional
	Phase string `json:"phase,omitempty"`

	// Phases reports each phase of the last pass.
	// +optional
	Phases []PhaseStatus `json:"phases,omitempty"`

	// Inventory of the objects applied.
	// +optional
	Inventory *Inventory `json:"inventory,omitempty"`

	// Drift reports the objects the last pass found drifted and left as they are
	// (spec.driftPolicy Report); absent when none did.
	// +optional
	Drift *DriftStatus `json:"drift,omitempty"`

	// History of completely applied revisions, newest first (at most 5).
	// +optional
	History []RevisionHistoryEntry `json:"history,omitempty"`
}
