package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/verify"
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
	verifier *verify.Verifier
	recorder record.EventRecorder
	own      *reconciler.Metrics
	options  reconciler.Options
	// hostedClusterAPI is false when the HostedCluster API is not installed.
	hostedClusterAPI bool
	now              func() time.Time
	writes           memberWrites
	// preflights keeps spec.rollout.preflight's verdicts (fleet_preflight.go).
	preflights preflightResults
	// applier gives the identity a member reads its spec.configFrom as (configReader), for the
	// preflight; nil in PreflightFleet, which reads as its client.
	applier *applier.Applier
	// analyses keeps spec.rollout.analysis's last verdicts (analyse.go).
	analyses *analyses
	// secrets keeps the copies of the Secrets the template names in the members' namespaces;
	// nil when the controller has no namespace to read them in.
	secrets *fleetSecrets
}

// steps returns the fleet steps for the lifecycle. A fleet's status is what its rollout
// decides from (target, stable revision, partition times) and every member's change wakes it,
// often before the cache shows the status it wrote last: the lifecycle keeps that
// (reconciler.CopyStatus). Every reconcile that did not fail (the lifecycle leaves out the failures it
// retries) has acted on the fleet's spec: the members are what the plan says, and what follows
// is their progress, which the status tells without a new generation; so each such reconcile
// observes the generation. A pass whose tag cannot be resolved or verified is one of them: it
// keeps the members on the target the fleet has (chooseTarget).
func (r *fleetSteps) steps() reconciler.Steps[*v1alpha1.HostedClusterPackage] {
	return reconciler.Steps[*v1alpha1.HostedClusterPackage]{
		Status: func(f *v1alpha1.HostedClusterPackage) reconciler.CommonStatus {
			return reconciler.CommonStatus{Request: &f.Status.ReconcileRequestStatus, ObservedGeneration: &f.Status.ObservedGeneration}
		},
		Suspended:  func(f *v1alpha1.HostedClusterPackage) bool { return f.Spec.Suspend },
		Observed:   func(*v1alpha1.HostedClusterPackage) bool { return true },
		Pass:       r.pass,
		Finalize:   r.finalize,
		Intervals:  r.intervals,
		CopyStatus: func(dst, src *v1alpha1.HostedClusterPackage) { dst.Status = *src.Status.DeepCopy() },
		Gone: func(key types.NamespacedName) {
			r.writes.forget(key.Name)
			r.preflights.forget(key.Name)
			r.analyses.forget(key.Name)
			if r.secrets != nil {
				r.secrets.forget(key.Name)
			}
		},
	}
}

// pass keeps the fleet's members: choose the target revision, plan the rollout from what the
// members show, write the members the plan moves, and set the status and outcome. An error is a
// failure the lifecycle reports (lifecycle.failed): a refused spec (a *reconciler.StageError whose reason
// stalls) is Stalled, anything else retried.
func (r *fleetSteps) pass(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, _ *reconciler.Report, lastHandled string) (ctrl.Result, error) {
	iv := r.intervals(fleet)
	if !r.hostedClusterAPI {
		// Looked at again at the interval like every stall, although only a restart of the
		// controller (which checks for the API when it starts) can help.
		return reconciler.Settle(fleet, reconciler.Outcome{State: reconciler.OutcomeStalled, Reason: v1alpha1.HostedClusterAPIMissingReason,
			Message: "the HostedCluster API (hypershift.openshift.io/v1beta1) is not installed on this cluster: a HostedClusterPackage needs HyperShift"}, iv), nil
	}
	// A cycle is refused before anything is asked of the registry or written to a member.
	if err := findCycle(ctx, fleet, r.cachedFleet); err != nil {
		return ctrl.Result{}, err
	}
	spec := &fleet.Spec
	target, held, err := r.chooseTarget(ctx, fleet, lastHandled)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case target == nil:
		// No target yet: wait for one, retried at the retry interval.
		return reconciler.Settle(fleet, *held, iv), nil
	}
	windows, err := rollout.ParseWindows(spec.Rollout.Windows)
	if err != nil {
		return ctrl.Result{}, &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: err}
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
	if plan.Complete {
		consumeApprovals(fleet, target.Name)
	}
	fleet.Status.TargetAppliedFrom = targetAppliedFrom(members, target.Name)
	o := fleetOutcome(fleet, plan, problems)
	if len(preflight) > 0 {
		o = preflightOutcome(target.Name, preflight)
	}
	if held != nil {
		// The members are kept on the target the fleet has; Ready says why it is not the tag's.
		o = *held
	}
	o.Wake = fleetRequeue(iv.Interval, plan.WakeAfter, len(problems) > 0 || held != nil, iv.Retry)
	return reconciler.Settle(fleet, o, iv), nil
}

// intervals are the fleet's intervals for the requeue rule (requeueFor): its template's
// interval (how often it resolves the tag), and the controller's retry and progress intervals
// (a template's retryInterval is its members').
func (r *fleetSteps) intervals(fleet *v1alpha1.HostedClusterPackage) reconciler.Intervals {
	return reconciler.Intervals{Interval: fleet.Spec.Template.Spec.GetInterval(), Retry: r.options.RetryInterval, Progress: r.options.ProgressInterval}
}

// plan plans the rollout from what the members show, with its gates: a standing rejection,
// the maintenance windows, the approvals of the target (approvals), the members that wait for
// the fleets spec.dependsOn names (dependencyGate), and (spec.rollout.preflight) the members a
// new target fails the preflight for, which it returns. A plan that rejects the target records
// the rejection.
func (r *fleetSteps) plan(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, target *v1alpha1.FleetRevision, members []*rollout.Member,
	windows []rollout.Window, lastHandled string, now time.Time) (rollout.Plan, []v1alpha1.MemberStatus, error) {
	strategy := fleet.Spec.Rollout
	gates := rollout.Gates{Rejected: standingRejection(fleet, target, lastHandled, now), Windows: windows,
		Analysis: r.analyse(ctx, fleet, target, members, now), Approved: approvals(fleet, target.Name)}
	moveTo := target.Name
	if gates.Rejected != "" && stableName(fleet) != "" {
		moveTo = stableName(fleet) // a standing rollback moves members to the stable revision
	}
	waits, err := r.dependencyGate(ctx, fleet, members, target.Name, moveTo)
	if err != nil {
		return rollout.Plan{}, nil, err
	}
	gates.Waiting = waits.why
	var preflight []v1alpha1.MemberStatus
	if strategy.Preflight && gates.Rejected == "" && target.Name != stableName(fleet) {
		if preflight, err = r.preflight(ctx, fleet, target, members, now); err != nil {
			return rollout.Plan{}, nil, err
		}
		gates.PreflightFailed = len(preflight) > 0
	}
	plan := rollout.Decide(members, memberPartitions(members, strategy.Partitions), target.Name, stableName(fleet), strategy, fleet.Status.Partitions, now, gates)
	waits.countWaited(fleet, plan.Waited)
	if plan.Rejects {
		fleet.Status.Rejected = &v1alpha1.FleetRejectedRevision{FleetRevision: *target, Reason: v1alpha1.RolloutHaltedReason,
			Message:    reconciler.BoundMessage(fmt.Sprintf("%d member(s) failed (spec.rollout.failureThreshold): %s", len(plan.Failed), describeMembers(plan.Failed)), maxMemberMessage),
			RejectedAt: metav1.NewTime(now.Truncate(time.Second))}
		ctrl.LoggerFrom(ctx).Info("rollout halted: revision rejected, members go back to the stable revision", "revision", target.Name, "stable", stableName(fleet))
	}
	return plan, preflight, nil
}

// write carries the plan out: the Secret copies first (a member moved in this pass pulls with
// them), then the members the plan keeps or moves, then the removal of members no cluster
// selects any more. It returns the members it could not keep, after the collisions.
func (r *fleetSteps) write(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, plan rollout.Plan, target *v1alpha1.FleetRevision,
	members []*rollout.Member, collisions []v1alpha1.MemberStatus, owned []*v1alpha1.Package, now time.Time) ([]v1alpha1.MemberStatus, error) {
	problems := slices.Clone(collisions)
	if r.secrets != nil {
		copyProblems, err := r.secrets.sync(ctx, fleet, members, owned)
		if err != nil {
			return nil, err
		}
		problems = append(problems, copyProblems...)
	}
	problems = append(problems, r.keepMembers(ctx, fleet, plan, members, target, now)...)
	if err := r.removeStrayMembers(ctx, fleet, members, collisions, owned); err != nil {
		return nil, err
	}
	return problems, nil
}

// chooseTarget returns the revision to roll out: the template's tag resolved and verified, or,
// when that fails (held says why), the target the fleet has, so that neither a registry outage
// nor an unsigned push freezes the fleet (it goes on adding clusters that join, removing those
// that leave, reverting drift); with no target yet, target is nil. A *reconciler.StageError refuses the
// spec: members would be refused without spec.verify, so the fleet refuses first, before any
// request.
func (r *fleetSteps) chooseTarget(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, lastHandled string) (*v1alpha1.FleetRevision, *reconciler.Outcome, error) {
	tmpl := &fleet.Spec.Template.Spec
	// The template's image is parsed once, here: what does not parse is refused as a failed
	// resolution (held, below), before any request.
	ref, err := source.ParseReference(tmpl.Image)
	if err != nil {
		err = &reconciler.StageError{Reason: v1alpha1.PullFailedReason, Err: fmt.Errorf("spec.template.spec.image: %w", err)}
	} else if rerr := r.verifier.Required(ctx, tmpl.Verify, fleetVerifyField, ref); rerr != nil {
		return nil, nil, rerr
	}
	var target *v1alpha1.FleetRevision
	var pinned source.Reference
	var creds source.Credentials
	if err == nil {
		target, pinned, creds, err = r.resolveTarget(ctx, fleet, ref, lastHandled)
	}
	verify := tmpl.Verify
	var held error
	if err != nil {
		held = err
	} else if verr := r.verifier.Check(ctx, r.source, verify, "", fleetVerifyField, pinned, creds); verr != nil {
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
	return fleet.Status.Target, &reconciler.Outcome{State: reconciler.OutcomeRetrying, Reason: reconciler.ReasonFor(err), Message: held.Error()}, nil
}

// standingRejection returns the name of the revision status.rejected names while the rejection
// holds: the target is that revision (the tag resolves to the same digest, the template and
// overrides are the same) and no reconcile request is waiting (lastHandled, as reconciler.RequestAge reads
// it). Otherwise the rejection is dropped from the status and "" returned: the target is
// rolled out again.
func standingRejection(fleet *v1alpha1.HostedClusterPackage, target *v1alpha1.FleetRevision, lastHandled string, now time.Time) string {
	rejected := fleet.Status.Rejected
	if rejected == nil {
		return ""
	}
	if _, requested := reconciler.RequestAge(fleet, lastHandled, now); requested || rejected.Name != target.Name {
		fleet.Status.Rejected = nil
		return ""
	}
	return rejected.Name
}

// memberPartitions orders the partitions the members are in.
func memberPartitions(members []*rollout.Member, p *v1alpha1.FleetPartitions) []string {
	present := make([]string, 0, len(members))
	for _, m := range members {
		present = append(present, m.Partition)
	}
	return rollout.PartitionOrder(present, p)
}

func stableName(fleet *v1alpha1.HostedClusterPackage) string {
	if fleet.Status.Stable == nil {
		return ""
	}
	return fleet.Status.Stable.Name
}

// fleetRequeue is the wake of a pass that kept the members, whatever its outcome: a rollout goes
// on when its members change (each change wakes the fleet), so it comes back at the interval
// (reconciler.Jittered), sooner when the plan changes by itself (a soak or a progress deadline ends), at
// the retry interval when a member could not be kept or the tag's revision is held.
func fleetRequeue(interval, wakeAfter time.Duration, failed bool, retry time.Duration) time.Duration {
	requeue := reconciler.Jittered(interval)
	if wakeAfter > 0 {
		requeue = min(requeue, wakeAfter)
	}
	if failed {
		requeue = min(requeue, retry)
	}
	return requeue
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

// resolveTarget resolves ref, the template's image, once per interval for the whole fleet, and names
// the revision it makes with the template. It also returns the image pinned to the digest and
// the credentials it was resolved with, to verify it.
func (r *fleetSteps) resolveTarget(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, ref source.Reference, lastHandled string) (*v1alpha1.FleetRevision, source.Reference, source.Credentials, error) {
	var none source.Reference
	tmpl := &fleet.Spec.Template.Spec
	creds, err := r.pullCredentials(ctx, fleet, ref)
	if err != nil {
		return nil, none, nil, err
	}
	maxAge := tmpl.GetInterval() / 2
	if age, pending := reconciler.RequestAge(fleet, lastHandled, r.now()); pending {
		maxAge = age
	}
	maxAge = r.options.Wakes.Bound(ref, false, maxAge, r.now())
	digest, err := r.source.ResolveWithin(ctx, ref, creds, maxAge)
	if err != nil {
		return nil, none, nil, reconciler.PullFailed(err)
	}
	r.options.Wakes.Resolved(ref, false, digest, r.now())
	td, err := templateDigest(&fleet.Spec)
	if err != nil {
		return nil, none, nil, err
	}
	pinned := ref.WithDigest(digest)
	return &v1alpha1.FleetRevision{Name: revisionName(digest, td), Image: pinned.String(), Digest: digest, TemplateDigest: td}, pinned, creds, nil
}

// pullCredentials are the credentials the fleet itself resolves and pulls with: its template's,
// read in the controller's namespace as a ClusterPackage's are (the pull Secret, or the cloud
// identity of the template's ServiceAccount of that namespace, else the controller's own). Each
// member reads its own in its namespace.
func (r *fleetSteps) pullCredentials(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, ref source.Reference) (source.Credentials, error) {
	tmpl := &fleet.Spec.Template.Spec
	return verify.PullCredentials(ctx, r.apiReader, r.options.Cloud, r.options.Namespace, tmpl.ServiceAccountName, tmpl, ref)
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
