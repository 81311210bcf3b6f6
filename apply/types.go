package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
)

// Target is one cluster a phase class is applied to.
type Target struct {
	// Client talks to the cluster. Its RESTMapper must discover kinds lazily (controller-runtime's
	// default dynamic mapper does), so that custom resources of a CRD applied in this pass resolve.
	Client client.Client
	// Name appears in messages, for example "management cluster" or "hosted cluster clusters-foo".
	Name string
	// Budget, when set, bounds the time one pass spends on this cluster, across all its phases:
	// a cluster that answers every request slowly then holds the caller's worker for at most
	// this long, and is reported unavailable.
	Budget time.Duration
}

// Owner is the resource on whose behalf objects are applied; it is written into ownership labels.
type Owner struct {
	Kind string
	// Namespace is empty for cluster-scoped owners.
	Namespace string
	Name      string
}

func (o Owner) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Request is one apply pass.
type Request struct {
	Owner  Owner
	Phases []desired.Phase
	Probes []v1alpha1.AvailabilityProbe
	// Targets maps a phase class ("" or v1alpha1.ClassHostedCluster) to its cluster.
	Targets map[string]Target
	// Previous is the inventory returned by the last pass, of this or an earlier revision. Objects
	// in it that the phases no longer hold are pruned once every phase is complete.
	Previous Inventory
	// Adopt says whether objects that exist without this owner's labels may be taken over;
	// empty means v1alpha1.AdoptNever.
	Adopt v1alpha1.AdoptionPolicy
	// DefaultNamespace is given to namespaced objects that name no namespace, typically the
	// namespace of a namespaced owner. Only the engine knows which kinds are namespaced.
	DefaultNamespace string
	// Confine maps a phase class to the one namespace its objects may be written to: every object
	// of that class must be of a namespaced kind and in that namespace. The engine resolves each
	// kind's scope with the target's RESTMapper before the first write of the pass, whatever
	// metadata.namespace says, and refuses kinds the cluster does not serve yet. Teams that may
	// write only in their own namespace are confined this way.
	Confine map[string]string
	// NoPrune lets objects of Previous that left the package go (they are dropped from the
	// inventory, not deleted).
	NoPrune bool
	// Record, when set, is called before the first write of an object that Previous does not
	// hold, with Previous plus every object the pass is about to create, by phase. The caller
	// stores it (the resource's status), so that a crash between a write and storing
	// Result.Inventory cannot leave an object no inventory knows of. An error stops the pass
	// before the write. It is called once before the pass's first write, with the objects of
	// every phase whose kinds resolve then on the management cluster and the first phase's
	// cluster; again only for objects resolved later (kinds of a CRD an earlier phase installs, a
	// hosted phase after a management phase); and not at all when the pass adds nothing (a no-op
	// pass writes nothing). What it was given stays in Result.Inventory unless the API server
	// refused the object.
	Record func(ctx context.Context, intended Inventory) error
	// DriftPolicy says what to do with an object someone changed since pkgsync applied its
	// unchanged desired state: apply it again (v1alpha1.DriftCorrect, the default) or leave it
	// (v1alpha1.DriftReport). Either way it is listed in Result.Drift.
	DriftPolicy v1alpha1.DriftPolicy
	// IgnoreFields name fields that are sent when an object is created and never after, nor
	// compared: another manager may change them. Pointers must parse (v1alpha1.ParseJSONPointer).
	IgnoreFields []v1alpha1.IgnoreFields
	// DryRun sends changes as server-side dry-run requests and walks every phase without waiting
	// for availability.
	DryRun bool
	// Progress, when set, is what earlier passes for the owner learnt of its objects: the pass
	// neither sends nor reads those found available in the state it desires, and creates those
	// recorded but never sent without reading them first. The caller keeps one per owner
	// (Progress).
	Progress *Progress
	// Interval is how often, at most, the owner's passes read every object (its reconcile
	// interval). A pass that updates a few objects trusts what the last complete pass found of
	// the others for this long: it neither reads nor sends them (settled.go). Zero: every pass
	// reads every object.
	Interval time.Duration
}

// ObjectStatus explains why an object is not available.
type ObjectStatus struct {
	Ref    ObjectRef
	Reason string
	// Failed says the object reports that it failed (kstatus Failed: a Deployment past its
	// progressDeadlineSeconds, a Job out of retries): it will not become available by waiting.
	Failed bool
}

func (s ObjectStatus) String() string { return s.Ref.String() + ": " + s.Reason }

// PhaseResult is the outcome of one phase in a pass.
type PhaseResult struct {
	Name  string
	Class string
	// Target is the name of the cluster the phase went to, empty when it was not reached.
	Target       string
	State        v1alpha1.PhaseState
	NotAvailable []ObjectStatus
}

// Action is what a pass did, or in dry-run would do, to an object.
type Action string

const (
	ActionCreated    Action = "created"
	ActionConfigured Action = "configured"
	ActionUnchanged  Action = "unchanged"
	ActionPruned     Action = "pruned"
)

// Change is the action taken on one object.
type Change struct {
	Ref    ObjectRef
	Action Action
}

// Result is the outcome of a pass. Apply returns it even together with an error, and its
// Inventory is then still the one to store.
type Result struct {
	Phases []PhaseResult
	// Inventory holds the objects applied so far plus the previous objects not pruned yet.
	Inventory Inventory
	// Changes lists every object touched or checked, in order; in dry-run what would happen.
	Changes []Change
	// Conditions are the conditions of applied objects that the phases' condition mappings
	// name, under their destination types, from the objects reached in this pass.
	Conditions []metav1.Condition
	// Drift lists the objects found drifted in this pass, corrected or left as they are
	// (Request.DriftPolicy).
	Drift []Drift
	// Created, Updated, Unchanged and Pruned count Changes by action.
	Created, Updated, Unchanged, Pruned int
}

// Complete reports whether every phase is complete: the pass has nothing left to wait for.
func (r *Result) Complete() bool {
	for _, p := range r.Phases {
		if p.State != v1alpha1.PhaseComplete {
			return false
		}
	}
	return true
}

// Failed returns the objects of the first phase that is not complete which report that they
// failed (ObjectStatus.Failed), none while every one of them may still become available.
func (r *Result) Failed() []ObjectStatus {
	p := r.Progressing()
	if p == nil {
		return nil
	}
	var failed []ObjectStatus
	for _, s := range p.NotAvailable {
		if s.Failed {
			failed = append(failed, s)
		}
	}
	return failed
}

// Progressing returns the first phase that is not complete, or nil.
func (r *Result) Progressing() *PhaseResult {
	for i := range r.Phases {
		if r.Phases[i].State != v1alpha1.PhaseComplete {
			return &r.Phases[i]
		}
	}
	return nil
}

// Summary is a one-line description of where the pass stands, for conditions and messages.
func (r *Result) Summary() string {
	p := r.Progressing()
	if p == nil {
		return fmt.Sprintf("%d phases complete", len(r.Phases))
	}
	if len(p.NotAvailable) == 0 {
		return fmt.Sprintf("phase %s on %s: %s", p.Name, p.Target, p.State)
	}
	reasons := make([]string, 0, len(p.NotAvailable))
	for _, s := range p.NotAvailable {
		reasons = append(reasons, s.String())
	}
	return fmt.Sprintf("phase %s on %s waiting for %s", p.Name, p.Target, strings.Join(reasons, "; "))
}

// addChange counts one change to an object in Changes and in the totals.
func (r *Result) addChange(ref ObjectRef, a Action) {
	r.Changes = append(r.Changes, Change{Ref: ref, Action: a})
	switch a {
	case ActionCreated:
		r.Created++
	case ActionConfigured:
		r.Updated++
	case ActionUnchanged:
		r.Unchanged++
	case ActionPruned:
		r.Pruned++
	}
}
