package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/source"
)

// +kubebuilder:rbac:groups=pkgsync.dev,resources=hostedclusterpackages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pkgsync.dev,resources=hostedclusterpackages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pkgsync.dev,resources=packages,verbs=create;delete

// maxListedMembers bounds the members listed in a fleet's status, and maxMemberMessage the
// message of each.
const (
	maxListedMembers = 10
	maxMemberMessage = 512
)

// fleetSteps are the steps of a HostedClusterPackage within the shared lifecycle: keep one
// member Package per selected hosted cluster, each on the revision the rollout assigns it.
type fleetSteps struct {
	client    client.Client
	apiReader client.Reader
	source    *source.Client
	// verifier is the Packages' verifier: a digest the fleet verified is in its cache when the
	// members verify it.
	verifier *signatureVerifier
	recorder record.EventRecorder
	own      *metrics
	options  Options
	// hostedClusterAPI is false when the HostedCluster API is not installed.
	hostedClusterAPI bool
	now              func() time.Time
	writes           memberWrites
	// preflights keeps spec.rollout.preflight's verdicts (fleet_preflight.go).
	preflights preflightResults
	// applier gives the identity a member reads its spec.configFrom as (configReader), for the
	// preflight; nil in PreflightFleet, which reads as its client.
	applier *applier
	// secrets keeps the copies of the Secrets the template names in the members' namespaces;
	// nil when the controller has no namespace to read them in.
	secrets *fleetSecrets
}

// steps returns the fleet steps for the lifecycle. A fleet's status is what its rollout
// decides from (target, stable revision, partition times) and every member's change wakes it,
// often before the cache shows the status it wrote last: the lifecycle keeps that
// (copyStatus). Every reconcile that did not fail (the lifecycle leaves out the failures it
// retries) has acted on the fleet's spec: the members are what the plan says, and what follows
// is their progress, which the status tells without a new generation; so each such reconcile
// observes the generation. A pass whose tag cannot be resolved or verified is one of them: it
// keeps the members on the target the fleet has (chooseTarget).
func (r *fleetSteps) steps() kindSteps[*v1alpha1.HostedClusterPackage] {
	return kindSteps[*v1alpha1.HostedClusterPackage]{
		status: func(f *v1alpha1.HostedClusterPackage) commonStatus {
			return commonStatus{request: &f.Status.ReconcileRequestStatus, observedGeneration: &f.Status.ObservedGeneration}
		},
		suspended:  func(f *v1alpha1.HostedClusterPackage) bool { return f.Spec.Suspend },
		observed:   func(*v1alpha1.HostedClusterPackage) bool { return true },
		pass:       r.pass,
		finalize:   r.finalize,
		intervals:  r.intervals,
		announce:   announceFleet,
		copyStatus: func(dst, src *v1alpha1.HostedClusterPackage) { dst.Status = *src.Status.DeepCopy() },
		gone: func(key types.NamespacedName) {
			r.writes.forget(key.Name)
			r.preflights.forget(key.Name)
			if r.secrets != nil {
				r.secrets.forget(key.Name)
			}
		},
	}
}

// pass keeps the fleet's members: choose the target revision, plan the rollout from what the
// members show, write the members the plan moves, and set the status and outcome. An error is a
// failure the lifecycle reports (lifecycle.failed): a refused spec (a *stageError whose reason
// stalls) is Stalled, anything else retried.
func (r *fleetSteps) pass(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, _ *report, lastHandled string) (ctrl.Result, error) {
	iv := r.intervals(fleet)
	if !r.hostedClusterAPI {
		// Looked at again at the interval like every stall, although only a restart of the
		// controller (which checks for the API when it starts) can help.
		return settle(fleet, outcome{state: outcomeStalled, reason: v1alpha1.HostedClusterAPIMissingReason,
			message: "the HostedCluster API (hypershift.openshift.io/v1beta1) is not installed on this cluster: a HostedClusterPackage needs HyperShift"}, iv), nil
	}
	spec := &fleet.Spec
	target, held, err := r.chooseTarget(ctx, fleet, lastHandled)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case target == nil:
		// No target yet: wait for one, retried at the retry interval.
		return settle(fleet, *held, iv), nil
	}
	windows, err := parseWindows(spec.Rollout.Windows)
	if err != nil {
		return ctrl.Result{}, &stageError{reason: v1alpha1.InvalidSpecReason, err: err}
	}
	owned, err := r.ownedMembers(ctx, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}
	members, collisions, err := r.members(ctx, fleet, owned)
	if err != nil {
		return ctrl.Result{}, err
	}
	learnVersions(&fleet.Status, members)
	now := r.now()
	plan, preflight, err := r.plan(ctx, fleet, target, members, windows, lastHandled, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	problems, err := r.write(ctx, fleet, plan, target, members, collisions, owned, now)
	if err != nil {
		return ctrl.Result{}, err
	}

	r.setStatus(fleet, plan, append(slices.Clone(problems), preflight...), now)
	fleet.Status.TargetAppliedFrom = targetAppliedFrom(members, target.Name)
	o := fleetOutcome(fleet, plan, problems)
	if len(preflight) > 0 {
		o = preflightOutcome(target.Name, preflight)
	}
	if held != nil {
		// The members are kept on the target the fleet has; Ready says why it is not the tag's.
		o = *held
	}
	o.wake = fleetRequeue(iv.interval, plan.wakeAfter, len(problems) > 0 || held != nil, iv.retry)
	return settle(fleet, o, iv), nil
}

// intervals are the fleet's intervals for the requeue rule (requeueFor): its template's
// interval (how often it resolves the tag), and the controller's retry and progress intervals
// (a template's retryInterval is its members').
func (r *fleetSteps) intervals(fleet *v1alpha1.HostedClusterPackage) intervals {
	return intervals{interval: fleet.Spec.Template.Spec.GetInterval(), retry: r.options.RetryInterval, progress: r.options.ProgressInterval}
}

// plan plans the rollout from what the members show, with its gates: a standing rejection,
// the maintenance windows, and (spec.rollout.preflight) the members a new target fails the
// preflight for, which it returns. A plan that rejects the target records the rejection.
func (r *fleetSteps) plan(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, target *v1alpha1.FleetRevision, members []*fleetMember,
	windows []fleetWindow, lastHandled string, now time.Time) (rolloutPlan, []v1alpha1.MemberStatus, error) {
	rollout := fleet.Spec.Rollout
	gates := planGates{rejected: standingRejection(fleet, target, lastHandled, now), windows: windows}
	var preflight []v1alpha1.MemberStatus
	if rollout.Preflight && gates.rejected == "" && target.Name != stableName(fleet) {
		var err error
		if preflight, err = r.preflight(ctx, fleet, target, members, now); err != nil {
			return rolloutPlan{}, nil, err
		}
		gates.preflightFailed = len(preflight) > 0
	}
	plan := planRollout(members, memberPartitions(members, rollout.Partitions), target.Name, stableName(fleet), rollout, fleet.Status.Partitions, now, gates)
	if plan.rejects {
		fleet.Status.Rejected = &v1alpha1.FleetRejectedRevision{FleetRevision: *target, Reason: v1alpha1.RolloutHaltedReason,
			Message:    boundMessage(fmt.Sprintf("%d member(s) failed (spec.rollout.failureThreshold): %s", len(plan.failed), describeMembers(plan.failed)), maxMemberMessage),
			RejectedAt: metav1.NewTime(now.Truncate(time.Second))}
		ctrl.LoggerFrom(ctx).Info("rollout halted: revision rejected, members go back to the stable revision", "revision", target.Name, "stable", stableName(fleet))
	}
	return plan, preflight, nil
}

// write carries the plan out: the Secret copies first (a member moved in this pass pulls with
// them), then the members the plan keeps or moves, then the removal of members no cluster
// selects any more. It returns the members it could not keep, after the collisions.
func (r *fleetSteps) write(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, plan rolloutPlan, target *v1alpha1.FleetRevision,
	members []*fleetMember, collisions []v1alpha1.MemberStatus, owned []*v1alpha1.Package, now time.Time) ([]v1alpha1.MemberStatus, error) {
	problems := slices.Clone(collisions)
	if r.secrets != nil {
		copyProblems, err := r.secrets.sync(ctx, fleet, members, owned)
		if err != nil {
			return nil, err
		}
		problems = append(problems, copyProblems...)
	}
	problems = append(problems, r.keepMembers(ctx, fleet, plan, members, target, now)...)
	if err := r.removeStrayMembers(ctx, members, collisions, owned); err != nil {
		return nil, err
	}
	return problems, nil
}

// chooseTarget returns the revision to roll out: the template's tag resolved and verified, or,
// when that fails (held says why), the target the fleet has, so that neither a registry outage
// nor an unsigned push freezes the fleet (it goes on adding clusters that join, removing those
// that leave, reverting drift); with no target yet, target is nil. A *stageError refuses the
// spec: members would be refused without spec.verify, so the fleet refuses first, before any
// request.
func (r *fleetSteps) chooseTarget(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, lastHandled string) (*v1alpha1.FleetRevision, *outcome, error) {
	verify := fleet.Spec.Template.Spec.Verify
	if err := r.verifier.required(ctx, verify, fleetVerifyField, fleet.Spec.Template.Spec.Image); err != nil {
		return nil, nil, err
	}
	target, pinned, creds, err := r.resolveTarget(ctx, fleet, lastHandled)
	var held error
	if err != nil {
		held = err
	} else if verr := r.verifier.check(ctx, verify, "", fleetVerifyField, pinned, creds); verr != nil {
		// A digest is verified before it becomes the target: one that fails never reaches a
		// member, canaries included. The verdict is cached per digest and key set, so members
		// verifying the same digest with the same keys cost no further request.
		err = verr
		held = fmt.Errorf("revision %s is not rolled out, members stay on the revisions they have%s: %w", target.Name, r.stableNote(fleet), verr)
	}
	if held == nil {
		carryVersion(target, fleet.Status.Target)
		fleet.Status.Target = target
		return target, nil, nil
	}
	// Retried whatever the reason: the tag may move, the registry come back, a signature appear.
	return fleet.Status.Target, &outcome{state: outcomeRetrying, reason: reasonFor(err), message: held.Error()}, nil
}

// standingRejection returns the name of the revision status.rejected names while the rejection
// holds: the target is that revision (the tag resolves to the same digest, the template and
// overrides are the same) and no reconcile request is waiting (lastHandled, as requestAge reads
// it). Otherwise the rejection is dropped from the status and "" returned: the target is
// rolled out again.
func standingRejection(fleet *v1alpha1.HostedClusterPackage, target *v1alpha1.FleetRevision, lastHandled string, now time.Time) string {
	rejected := fleet.Status.Rejected
	if rejected == nil {
		return ""
	}
	if _, requested := requestAge(fleet, lastHandled, now); requested || rejected.Name != target.Name {
		fleet.Status.Rejected = nil
		return ""
	}
	return rejected.Name
}

// memberPartitions orders the partitions the members are in.
func memberPartitions(members []*fleetMember, p *v1alpha1.FleetPartitions) []string {
	present := make([]string, 0, len(members))
	for _, m := range members {
		present = append(present, m.partition)
	}
	return partitionOrder(present, p)
}

func stableName(fleet *v1alpha1.HostedClusterPackage) string {
	if fleet.Status.Stable == nil {
		return ""
	}
	return fleet.Status.Stable.Name
}

// keepMembers writes each member the plan assigns a revision, and the ownership of the others
// (keepOwnership), and returns the members that could not be written.
func (r *fleetSteps) keepMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, plan rolloutPlan, members []*fleetMember,
	target *v1alpha1.FleetRevision, now time.Time) []v1alpha1.MemberStatus {
	spec := &fleet.Spec
	targetSource := fleetRevisionSource{name: target.Name, image: target.Image, template: &spec.Template, overrides: spec.ConfigOverrides}
	var stableSource fleetRevisionSource
	if s := fleet.Status.Stable; s != nil {
		stableSource = fleetRevisionSource{name: s.Name, image: s.Image, template: &s.Template, overrides: s.ConfigOverrides}
	}
	var problems []v1alpha1.MemberStatus
	for _, m := range members {
		var src fleetRevisionSource
		switch plan.assign[m.namespace] {
		case toTarget:
			src = targetSource
		case toStable:
			src = stableSource
		default:
			if err := keepOwnership(ctx, r.client, m, fleet); err != nil {
				problems = append(problems, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: m.partition, Reason: memberErrorReason(err), Message: err.Error()})
			}
			continue
		}
		if err := r.keepMember(ctx, fleet, src, m, now); err != nil {
			problems = append(problems, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: m.partition, Reason: memberErrorReason(err), Message: err.Error()})
		}
	}
	return problems
}

// fleetRequeue is the wake of a pass that kept the members, whatever its outcome: a rollout goes
// on when its members change (each change wakes the fleet), so it comes back at the interval
// (jittered), sooner when the plan changes by itself (a soak or a progress deadline ends), at
// the retry interval when a member could not be kept or the tag's revision is held.
func fleetRequeue(interval, wakeAfter time.Duration, failed bool, retry time.Duration) time.Duration {
	requeue := jittered(interval)
	if wakeAfter > 0 {
		requeue = min(requeue, wakeAfter)
	}
	if failed {
		requeue = min(requeue, retry)
	}
	return requeue
}

// finalize carries out spec.deletionPolicy, whatever kubectl delete's --cascade was (see
// fleet_ownership.go: members and copies are found by the fleet's UID, which no garbage
// collector takes off). Delete deletes every member, then the copied Secrets once the members
// are gone (each member's own finalizer tears its objects down first; member deletions wake
// the fleet), and removes the finalizer. Orphan releases the members and their copies
// (orphan) instead. The members are waited for in the cache; what is deleted or released last
// and the finalizer are decided on fresh reads, so that nothing written moments before the
// deletion, which the cache may not show yet, is left with the fleet's label. An error is a
// failure the lifecycle reports and retries (lifecycle.failed), as a failed pass is.
func (r *fleetSteps) finalize(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fleet, v1alpha1.FinalizerName) {
		// Deleted before its first reconcile wrote the finalizer, so before any member, or
		// done and held by the garbage collector's finalizer: nothing is the fleet's to do.
		return ctrl.Result{}, nil
	}
	if fleet.Spec.GetDeletionPolicy() == v1alpha1.FleetDeletionOrphan {
		return r.orphan(ctx, fleet)
	}
	owned, err := r.ownedMembers(ctx, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(owned) == 0 {
		if owned, err = r.listMembers(ctx, r.apiReader, fleet); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, p := range owned {
		if p.DeletionTimestamp.IsZero() {
			if err := r.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete member %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	if left := len(owned); left > 0 {
		// Each member's deletion wakes the fleet; the progress interval bounds a wake missed.
		return settle(fleet, outcome{state: outcomeProgressing, reason: v1alpha1.DeletingReason,
			message: fmt.Sprintf("waiting for %d member(s) to be torn down", left)}, r.intervals(fleet)), nil
	}
	if r.secrets != nil {
		if err := r.secrets.deleteAll(ctx, fleet); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.finished(ctx, fleet)
}

// orphan releases the fleet's members (deletionPolicy Orphan): each keeps its spec, pinned to
// the digest of its revision, and reconciles on its own; nothing ties it to the fleet any more
// (releaseFromFleet). Members already being deleted (their HostedCluster left the fleet) are
// waited for first, as Delete does. The copied Secrets in the namespaces of the members
// released stay, released too, for them to go on pulling and verifying with; copies elsewhere
// are deleted. Copies go first: a pass that fails half way through the members finds them
// released already, and never takes a released member's copy for a stray one. Everything is
// read afresh: the release is one pass, and it must not miss what the cache does not show yet.
func (r *fleetSteps) orphan(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) (ctrl.Result, error) {
	owned, err := r.listMembers(ctx, r.apiReader, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}
	live := map[string]bool{}
	deleting := 0
	for _, p := range owned {
		if p.DeletionTimestamp.IsZero() {
			live[p.Namespace] = true
		} else {
			deleting++
		}
	}
	if deleting > 0 {
		return settle(fleet, outcome{state: outcomeProgressing, reason: v1alpha1.DeletingReason,
			message: fmt.Sprintf("waiting for %d member(s) of clusters that left the fleet to be torn down; then the others are released (spec.deletionPolicy=Orphan)", deleting)},
			r.intervals(fleet)), nil
	}
	if r.secrets != nil {
		if err := r.secrets.release(ctx, fleet, live); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, p := range owned {
		if err := releaseFromFleet(ctx, r.client, r.apiReader, p, fleet); err != nil {
			return ctrl.Result{}, fmt.Errorf("release member %s/%s: %w", p.Namespace, p.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("released member: it reconciles on its own (spec.deletionPolicy=Orphan)", "namespace", p.Namespace)
	}
	return r.finished(ctx, fleet)
}

// finished forgets what is kept for a fleet whose deletion is done, and removes its finalizer
// (removeFleetFinalizer).
func (r *fleetSteps) finished(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) (ctrl.Result, error) {
	if err := removeFleetFinalizer(ctx, r.client, r.apiReader, fleet); err != nil {
		return ctrl.Result{}, err
	}
	r.writes.forget(fleet.Name)
	r.preflights.forget(fleet.Name)
	r.own.fleetMembers.DeletePartialMatch(map[string]string{"fleet": fleet.Name})
	return ctrl.Result{}, nil
}

// fleetVerifyField is where a fleet's verification settings are: the template's, which its
// members verify with too.
const fleetVerifyField = "spec.template.spec.verify"

// stableNote names the stable revision, which members the rollout has not reached stay on.
func (r *fleetSteps) stableNote(fleet *v1alpha1.HostedClusterPackage) string {
	if fleet.Status.Stable == nil {
		return ""
	}
	return " (stable revision " + fleet.Status.Stable.Name + ")"
}

// resolveTarget resolves the template's tag, once per interval for the whole fleet, and names
// the revision it makes with the template. It also returns the image pinned to the digest and
// the credentials it was resolved with, to verify it.
func (r *fleetSteps) resolveTarget(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, lastHandled string) (*v1alpha1.FleetRevision, source.Reference, source.Credentials, error) {
	var none source.Reference
	tmpl := &fleet.Spec.Template.Spec
	ref, err := source.ParseReference(tmpl.Image)
	if err != nil {
		return nil, none, nil, &stageError{reason: v1alpha1.PullFailedReason, err: fmt.Errorf("spec.template.spec.image: %w", err)}
	}
	creds, err := readPullCredentials(ctx, r.apiReader, r.options.Namespace, tmpl.PullSecretRef)
	if err != nil {
		return nil, none, nil, err
	}
	maxAge := tmpl.GetInterval() / 2
	if age, pending := requestAge(fleet, lastHandled, r.now()); pending {
		maxAge = age
	}
	maxAge = r.options.Wakes.bound(ref, false, maxAge, r.now())
	digest, err := r.source.ResolveWithin(ctx, ref, creds, maxAge)
	if err != nil {
		return nil, none, nil, pullFailed(err)
	}
	r.options.Wakes.resolved(ref, false, digest, r.now())
	td, err := templateDigest(&fleet.Spec)
	if err != nil {
		return nil, none, nil, err
	}
	pinned := ref.WithDigest(digest)
	return &v1alpha1.FleetRevision{Name: revisionName(digest, td), Image: pinned.String(), Digest: digest, TemplateDigest: td}, pinned, creds, nil
}

// members lists the selected HostedClusters with their member Packages, and the clusters that
// get no member: those whose namespace holds a Package of the member's name that is not this
// fleet's, and those whose hosted-control-plane namespace another HostedCluster maps to too
// (a-x/b and a/x-b both map to a-x-b) when HyperShift's HostedControlPlane there does not name
// them. One namespace never gets a member written for two clusters.
func (r *fleetSteps) members(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, owned []*v1alpha1.Package) ([]*fleetMember, []v1alpha1.MemberStatus, error) {
	selector := labels.Everything()
	if fleet.Spec.HostedClusterSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(fleet.Spec.HostedClusterSelector); err != nil {
			return nil, nil, &stageError{reason: v1alpha1.InvalidSpecReason, err: fmt.Errorf("spec.hostedClusterSelector: %w", err)}
		}
	}
	hcs := &unstructured.UnstructuredList{}
	hcs.SetGroupVersionKind(hosted.HostedClusterGVK.GroupVersion().WithKind(hosted.HostedClusterGVK.Kind + "List"))
	// Every HostedCluster, selected or not: an unselected one may own the namespace a selected
	// one maps to.
	if err := r.client.List(ctx, hcs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list HostedClusters: %w", err)
	}
	mapped := map[string][]types.NamespacedName{}
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		ns := hosted.ControlPlaneNamespace(hc.GetNamespace(), hc.GetName())
		mapped[ns] = append(mapped[ns], types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()})
	}
	owners := namespaceOwners{}
	byNamespace := map[string]*v1alpha1.Package{}
	for _, p := range owned {
		byNamespace[p.Namespace] = p
	}
	var (
		members    []*fleetMember
		collisions []v1alpha1.MemberStatus
	)
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		if !hc.GetDeletionTimestamp().IsZero() || !selector.Matches(labels.Set(hc.GetLabels())) {
			continue
		}
		m := &fleetMember{namespace: hosted.ControlPlaneNamespace(hc.GetNamespace(), hc.GetName()), labels: hc.GetLabels(), cluster: hosted.HostedClusterOf(hc)}
		if p := fleet.Spec.Rollout.Partitions; p != nil {
			m.partition = hc.GetLabels()[p.LabelKey]
		}
		self := types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()}
		msg, err := owners.collision(ctx, r.apiReader, m.namespace, self, mapped[m.namespace])
		if err != nil {
			return nil, nil, err
		}
		if msg != "" {
			collisions = append(collisions, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: m.partition, Reason: v1alpha1.CollisionReason,
				Message: msg + "; no member is written for it, and a member there is left as it is"})
			continue
		}
		m.pkg, m.pending = r.writes.view(fleet, m.namespace, byNamespace[m.namespace])
		if m.pkg == nil {
			other := &v1alpha1.Package{}
			err := r.client.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: fleet.Name}, other)
			switch {
			case err == nil:
				collisions = append(collisions, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: m.partition, Reason: v1alpha1.CollisionReason,
					Message: fmt.Sprintf("Package %s/%s exists and is not this fleet's (label %s=%q): it is left alone; delete or rename it",
						m.namespace, fleet.Name, v1alpha1.FleetLabel, other.Labels[v1alpha1.FleetLabel])})
				continue
			case !apierrors.IsNotFound(err):
				return nil, nil, fmt.Errorf("read Package %s/%s: %w", m.namespace, fleet.Name, err)
			}
		}
		members = append(members, m)
	}
	slices.SortFunc(members, func(a, b *fleetMember) int { return strings.Compare(a.namespace, b.namespace) })
	return members, collisions, nil
}

// namespaceOwners remembers, within one reconcile, which HostedCluster owns a namespace
// several map to (or why that cannot be told).
type namespaceOwners map[string]namespaceOwner

type namespaceOwner struct {
	owner types.NamespacedName
	err   error
}

// collision says why the HostedCluster self gets no member in namespace, which candidates map
// to: another one's HostedControlPlane names it, or none can be told apart. "" when self may
// have it.
func (o namespaceOwners) collision(ctx context.Context, reader client.Reader, namespace string, self types.NamespacedName, candidates []types.NamespacedName) (string, error) {
	if len(candidates) <= 1 {
		return "", nil
	}
	known, seen := o[namespace]
	if !seen {
		// Uncached and metadata only, for the rare namespace several clusters map to.
		owner, err := hosted.OwnerOfNamespace(ctx, reader, namespace, candidates)
		var ambiguous *hosted.AmbiguousError
		if err != nil && !errors.As(err, &ambiguous) {
			return "", err
		}
		known = namespaceOwner{owner: owner, err: err}
		o[namespace] = known
	}
	switch {
	case known.err != nil:
		return known.err.Error(), nil
	case known.owner != self:
		return fmt.Sprintf("HostedCluster %s maps to namespace %s, which belongs to HostedCluster %s (its HostedControlPlane names it)", self, namespace, known.owner), nil
	}
	return "", nil
}

// ownedMembers lists the fleet's members from the cache (IsFleetMember). Read once per
// reconcile and shared by its steps.
func (r *fleetSteps) ownedMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) ([]*v1alpha1.Package, error) {
	return r.listMembers(ctx, r.client, fleet)
}

// listMembers lists the fleet's members as reader has them: the Packages labelled with the
// fleet (a selection the API server or the cache makes) that are its members.
func (r *fleetSteps) listMembers(ctx context.Context, reader client.Reader, fleet *v1alpha1.HostedClusterPackage) ([]*v1alpha1.Package, error) {
	list := &v1alpha1.PackageList{}
	if err := reader.List(ctx, list, client.MatchingLabels{v1alpha1.FleetLabel: fleet.Name}); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	var owned []*v1alpha1.Package
	for i := range list.Items {
		if p := &list.Items[i]; IsFleetMember(p, fleet) {
			owned = append(owned, p)
		}
	}
	return owned, nil
}

// keepMember creates or corrects one member; a member that already is what it should be costs
// no request.
func (r *fleetSteps) keepMember(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, src fleetRevisionSource, m *fleetMember, now time.Time) error {
	desired, err := desiredMember(fleet, src, m, now)
	if err != nil {
		return &stageError{reason: v1alpha1.InvalidConfigReason, err: err}
	}
	withShardLabels(desired, fleet, r.options.ShardLabelKeys)
	if m.pending && m.revision() == src.name {
		return nil // written moments ago; the cache has not caught up
	}
	if m.pkg != nil && !m.pending && memberUpToDate(m.pkg, desired, fleet) {
		return nil
	}
	existing := m.pkg
	if m.pending {
		// The cache is behind the fleet's own write: read the member as it is now.
		existing = &v1alpha1.Package{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: fleet.Name}, existing); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("read member %s/%s: %w", m.namespace, fleet.Name, err)
			}
			existing = nil
		}
	}
	generation, err := writeMember(ctx, r.client, fleet, existing, desired)
	if err != nil {
		return err
	}
	r.writes.record(fleet, m.namespace, generation, src.name)
	return nil
}

// removeStrayMembers deletes the fleet's members whose HostedCluster is gone or no longer
// selected. Each one's finalizer tears its objects down. A member in a namespace of a collision
// stays: which HostedCluster it serves cannot be told, and deleting it would tear down what it
// installed because someone created a HostedCluster with a colliding name.
func (r *fleetSteps) removeStrayMembers(ctx context.Context, members []*fleetMember, collisions []v1alpha1.MemberStatus, owned []*v1alpha1.Package) error {
	keep := map[string]bool{}
	for _, m := range members {
		keep[m.namespace] = true
	}
	for _, c := range collisions {
		keep[c.Namespace] = true
	}
	for _, p := range owned {
		if keep[p.Namespace] || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete member %s/%s: %w", p.Namespace, p.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("removed member of a HostedCluster no longer selected", "namespace", p.Namespace)
	}
	return nil
}

func memberErrorReason(err error) string {
	var stage *stageError
	switch {
	case errors.As(err, &stage):
		return stage.reason
	case apierrors.IsNotFound(err):
		return v1alpha1.NamespaceNotFoundReason
	}
	return v1alpha1.MemberWriteFailedReason
}

// setStatus sets the fleet's status from the plan, with events and metrics for what changed; the
// lifecycle's report writes it.
func (r *fleetSteps) setStatus(fleet *v1alpha1.HostedClusterPackage, plan rolloutPlan, problems []v1alpha1.MemberStatus, now time.Time) {
	st := &fleet.Status
	r.announcePartitions(fleet, st.Partitions, plan.partitions, now)
	st.Partitions = plan.partitions
	st.MemberCounts = plan.counts
	st.Progress = fmt.Sprintf("%d/%d/%d", plan.counts.Updated, plan.counts.Ready, plan.counts.Total)
	st.CurrentPartition = plan.current
	st.InProgress = bounded(plan.inProgress)
	st.FailedMembers = bounded(append(slices.Clone(plan.failed), problems...))
	st.BlockedMembers = bounded(plan.blocked)
	st.HeldMembers = bounded(plan.held)
	for state, n := range map[string]int32{"total": plan.counts.Total, "updated": plan.counts.Updated, "ready": plan.counts.Ready, "failed": plan.counts.Failed,
		"blocked": plan.counts.Blocked, "held": plan.counts.Held} {
		r.own.fleetMembers.WithLabelValues(fleet.Name, state).Set(float64(n))
	}
	if plan.complete && (st.Stable == nil || st.Stable.Name != st.Target.Name) {
		st.Stable = &v1alpha1.FleetStableRevision{FleetRevision: *st.Target, Template: *fleet.Spec.Template.DeepCopy()}
		for _, o := range fleet.Spec.ConfigOverrides {
			st.Stable.ConfigOverrides = append(st.Stable.ConfigOverrides, *o.DeepCopy())
		}
	}
}

// fleetOutcome is what the plan and the members that could not be kept make of the fleet's
// conditions.
func fleetOutcome(fleet *v1alpha1.HostedClusterPackage, plan rolloutPlan, problems []v1alpha1.MemberStatus) outcome {
	target, progress := fleet.Status.Target.Name, fleet.Status.Progress
	where := ""
	if plan.current != "" {
		where = fmt.Sprintf("partition %s: ", partitionName(plan.current))
	}
	switch {
	case plan.rollingBack:
		return rollbackOutcome(fleet, plan)
	case plan.halted:
		return outcome{state: outcomeStalled, reason: v1alpha1.RolloutHaltedReason, message: fmt.Sprintf("rollout of %s halted in partition %s: %d member(s) failed (spec.rollout.failureThreshold): %s",
			target, partitionName(plan.current), len(plan.failed), describeMembers(plan.failed))}
	case plan.counts.Total == 0 && len(problems) == 0:
		return outcome{state: outcomeSucceeded, message: "no HostedCluster matches spec.hostedClusterSelector: 0 members"}
	case len(problems) > 0:
		return outcome{state: outcomeProgressing, reason: v1alpha1.MembersFailedReason, message: fmt.Sprintf("%d member(s) cannot be kept: %s", len(problems), describeMembers(problems))}
	case plan.complete && plan.counts.Blocked+plan.counts.Held > 0:
		return outcome{state: outcomeSucceeded, message: fmt.Sprintf("%d member(s) Ready on revision %s; %d blocked, %d held (status.blockedMembers, status.heldMembers): each moves once unblocked or released",
			plan.counts.Total-plan.counts.Blocked-plan.counts.Held, target, plan.counts.Blocked, plan.counts.Held)}
	case plan.complete:
		return outcome{state: outcomeSucceeded, message: fmt.Sprintf("%d member(s) Ready on revision %s", plan.counts.Total, target)}
	case fleet.Spec.Rollout.Paused:
		return outcome{state: outcomeWaiting, reason: v1alpha1.RolloutPausedReason, message: fmt.Sprintf("%srollout of %s paused (spec.rollout.paused): %s updated/ready/total", where, target, progress)}
	default:
		return outcome{state: outcomeProgressing, reason: v1alpha1.RolloutProgressingReason, message: fmt.Sprintf("%srolling out %s: %s updated/ready/total", where, target, progress)}
	}
}

// rollbackOutcome says where the rollback of a rejected revision is: moving members back, or
// done and waiting for another digest or a reconcile request.
func rollbackOutcome(fleet *v1alpha1.HostedClusterPackage, plan rolloutPlan) outcome {
	rejected, stable := fleet.Status.Rejected, stableName(fleet)
	name, why := "", ""
	if rejected != nil {
		name, why = rejected.Name, rejected.Message
	}
	if plan.current != "" {
		return outcome{state: outcomeProgressing, reason: v1alpha1.RollingBackReason, message: fmt.Sprintf(
			"revision %s rejected (spec.rollout.onFailure=Rollback): partition %s: moving members back to stable revision %s, %s updated/ready/total: %s",
			name, partitionName(plan.current), stable, fleet.Status.Progress, why)}
	}
	aside := ""
	if n := plan.counts.Blocked + plan.counts.Held; n > 0 {
		aside = fmt.Sprintf(" (%d blocked or held member(s) stay where they are until unblocked or released)", n)
	}
	return outcome{state: outcomeStalled, reason: v1alpha1.RolledBackReason, message: fmt.Sprintf(
		"revision %s rejected (spec.rollout.onFailure=Rollback): members are back on stable revision %s%s; it is not rolled out again until the tag resolves to another digest or a reconcile is requested: %s",
		name, stable, aside, why)}
}

// announceFleet emits an event when Ready changes status or reason: progress within a rollout
// is told by the partition events, not by one event per member.
func announceFleet(rec record.EventRecorder, fleet *v1alpha1.HostedClusterPackage, old *metav1.Condition) {
	now := conditions.Get(fleet, meta.ReadyCondition)
	if rec == nil || now == nil || (old != nil && old.Status == now.Status && old.Reason == now.Reason) {
		return
	}
	eventType := corev1.EventTypeNormal
	switch now.Reason {
	case v1alpha1.RolloutProgressingReason, v1alpha1.RolloutPausedReason, v1alpha1.DeletingReason, v1alpha1.ReconciliationSucceededReason:
	default:
		eventType = corev1.EventTypeWarning
	}
	rec.Event(fleet, eventType, now.Reason, now.Message)
}

// announcePartitions emits an event per partition transition: start, finish, halt, resume.
func (r *fleetSteps) announcePartitions(fleet *v1alpha1.HostedClusterPackage, before, after []v1alpha1.PartitionStatus, now time.Time) {
	old := map[string]v1alpha1.PartitionStatus{}
	for _, p := range before {
		old[p.Name] = p
	}
	target := fleet.Status.Target.Name
	for _, p := range after {
		prev, seen := old[p.Name]
		if seen && prev.State == p.State {
			continue
		}
		name := partitionName(p.Name)
		switch p.State {
		case v1alpha1.PartitionProgressing:
			if seen && prev.State == v1alpha1.PartitionHalted {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.RolloutResumedReason, "partition %s: rollout of %s resumed", name, target)
			} else {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.PartitionStartedReason, "partition %s: rolling out %s", name, target)
			}
		case v1alpha1.PartitionHalted:
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, v1alpha1.RolloutHaltedReason, "partition %s: rollout of %s halted", name, target)
		case v1alpha1.PartitionRollingBack:
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, v1alpha1.RollingBackReason, "partition %s: moving members back to stable revision %s", name, stableName(fleet))
		case v1alpha1.PartitionComplete:
			if seen && prev.State != v1alpha1.PartitionPending {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, v1alpha1.PartitionCompleteReason, "partition %s: every member Ready on %s", name, target)
				if p.StartedAt != nil {
					r.own.partitionDuration.WithLabelValues(fleet.Name).Observe(now.Sub(p.StartedAt.Time).Seconds())
				}
			}
		}
	}
}

func partitionName(name string) string {
	if name == "" {
		return "(unlabelled)"
	}
	return name
}

func describeMembers(ms []v1alpha1.MemberStatus) string {
	parts := make([]string, 0, min(len(ms), 3))
	for i, m := range ms {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ms)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %s: %s", m.Namespace, m.Reason, m.Message))
	}
	return strings.Join(parts, "; ")
}

// bounded keeps the first maxListedMembers members, each message bounded the way condition
// messages are (boundMessage).
func bounded(ms []v1alpha1.MemberStatus) []v1alpha1.MemberStatus {
	if len(ms) > maxListedMembers {
		ms = ms[:maxListedMembers]
	}
	for i := range ms {
		ms[i].Message = boundMessage(ms[i].Message, maxMemberMessage)
	}
	return ms
}

// fleetsOf maps any event to a request for every fleet: HostedClusters join, leave and change
// labels, and each fleet decides for itself whether it selects them.
func fleetsOf(c client.Client) func(context.Context, client.Object) []ctrl.Request {
	return func(ctx context.Context, _ client.Object) []ctrl.Request {
		list := &v1alpha1.HostedClusterPackageList{}
		if err := c.List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list HostedClusterPackages for a HostedCluster change")
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(list.Items))
		for _, f := range list.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKey{Name: f.Name}})
		}
		return reqs
	}
}
