package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/patch"
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

// Fleet condition reasons.
const (
	// RolloutProgressingReason: members are being moved to the target revision.
	RolloutProgressingReason = "RolloutProgressing"
	// RolloutHaltedReason: more members failed than spec.rollout.failureThreshold allows.
	RolloutHaltedReason = "RolloutHalted"
	// RolloutPausedReason: spec.rollout.paused holds a rollout that is not finished.
	RolloutPausedReason = "RolloutPaused"
	// MembersFailedReason: members could not be written, or collide with Packages that are
	// not the fleet's.
	MembersFailedReason = "MembersFailed"
	// InvalidSpecReason: the spec cannot be acted on (a selector the API server let through).
	InvalidSpecReason = "InvalidSpec"
	// HostedClusterAPIMissingReason: the HostedCluster API is not installed.
	HostedClusterAPIMissingReason = "HostedClusterAPIMissing"
)

// maxListedMembers bounds the members listed in a fleet's status.
const maxListedMembers = 10

// fleetReconciler keeps a HostedClusterPackage's members: one Package per selected hosted
// cluster, each on the revision the rollout assigns it.
type fleetReconciler struct {
	client    client.Client
	apiReader client.Reader
	source    *source.Client
	// verifier is the Packages' verifier: a digest the fleet verified is in its cache when the
	// members verify it.
	verifier *signatureVerifier
	recorder record.EventRecorder
	metrics  runtimectrl.Metrics
	own      *metrics
	options  Options
	// hostedClusterAPI is false when the HostedCluster API is not installed.
	hostedClusterAPI bool
	now              func() time.Time
	writes           memberWrites
	// statuses holds the status last written per fleet UID.
	statuses sync.Map
}

// Reconcile implements reconcile.Reconciler.
func (r *fleetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	fleet := &v1alpha1.HostedClusterPackage{}
	if err := r.client.Get(ctx, req.NamespacedName, fleet); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	start := r.now()
	if written, ok := r.statuses.Load(fleet.UID); ok {
		// This controller is the only writer of a fleet's status: what it wrote last is newer
		// than, or the same as, what the cache may still show.
		fleet.Status = *written.(*v1alpha1.HostedClusterPackageStatus).DeepCopy()
	}
	patcher := patch.NewSerialPatcher(fleet, r.client)
	if !fleet.DeletionTimestamp.IsZero() {
		oldReady := conditions.Get(fleet, meta.ReadyCondition).DeepCopy()
		defer announceFleet(r.recorder, fleet, oldReady)
		return r.finalize(ctx, fleet, patcher)
	}
	if !controllerutil.ContainsFinalizer(fleet, v1alpha1.FinalizerName) {
		// Before any member exists: deleting the fleet removes its members, and waits for their
		// teardown, whether or not a garbage collector runs.
		controllerutil.AddFinalizer(fleet, v1alpha1.FinalizerName)
		if err := patcher.Patch(ctx, fleet, patch.WithFieldOwner(fieldOwner)); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	oldReady := conditions.Get(fleet, meta.ReadyCondition).DeepCopy()
	lastHandled := fleet.Status.GetLastHandledReconcileRequest()
	defer func() {
		if token, ok := meta.ReconcileAnnotationValue(fleet.GetAnnotations()); ok {
			fleet.Status.SetLastHandledReconcileRequest(token)
		}
		if retErr == nil {
			fleet.Status.ObservedGeneration = fleet.Generation
		}
		boundConditionMessages(fleet)
		if err := patcher.Patch(ctx, fleet, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(fieldOwner)); err != nil {
			r.statuses.Delete(fleet.UID)
			retErr = errors.Join(retErr, client.IgnoreNotFound(err))
		} else {
			r.statuses.Store(fleet.UID, fleet.Status.DeepCopy())
		}
		r.metrics.RecordDuration(ctx, fleet, start)
		r.metrics.RecordReadiness(ctx, fleet)
		announceFleet(r.recorder, fleet, oldReady)
	}()

	r.metrics.RecordSuspend(ctx, fleet, fleet.Spec.Suspend)
	if fleet.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	if !r.hostedClusterAPI {
		err := errors.New("the HostedCluster API (hypershift.openshift.io/v1beta1) is not installed on this cluster: a HostedClusterPackage needs HyperShift")
		conditions.MarkFalse(fleet, meta.ReadyCondition, HostedClusterAPIMissingReason, "%s", err)
		conditions.MarkStalled(fleet, HostedClusterAPIMissingReason, "%s", err)
		conditions.Delete(fleet, meta.ReconcilingCondition)
		return ctrl.Result{}, nil
	}
	conditions.Delete(fleet, meta.StalledCondition)
	return r.reconcileFleet(ctx, fleet, lastHandled)
}

func (r *fleetReconciler) reconcileFleet(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, lastHandled string) (ctrl.Result, error) {
	spec := &fleet.Spec
	interval := spec.Template.Spec.GetInterval()
	// Members would be refused without spec.verify: the fleet refuses first, before any request.
	if err := r.verifier.required(ctx, spec.Template.Spec.Verify, fleetVerifyField, spec.Template.Spec.Image); err != nil {
		var refused *stageError
		if !errors.As(err, &refused) {
			return ctrl.Result{}, err // the policies could not be read: retried
		}
		conditions.MarkFalse(fleet, meta.ReadyCondition, v1alpha1.VerificationRequiredReason, "%s", err)
		conditions.MarkStalled(fleet, v1alpha1.VerificationRequiredReason, "%s", err)
		conditions.Delete(fleet, meta.ReconcilingCondition)
		return ctrl.Result{}, nil
	}
	// held says why the target stays where it is: the tag could not be resolved, or its digest
	// failed verification. The fleet then goes on managing its members with the target it has
	// (adding clusters that join, removing those that leave, reverting drift), so that neither a
	// registry outage nor an unsigned push freezes it; with no target yet, it waits.
	var held error
	var heldReason string
	target, pinned, creds, err := r.resolveTarget(ctx, fleet, lastHandled)
	if err != nil {
		held, heldReason = err, reasonFor(err)
	} else if err := r.verifier.check(ctx, spec.Template.Spec.Verify, "", fleetVerifyField, pinned, creds); err != nil {
		// A digest is verified before it becomes the target: one that fails never reaches a
		// member, canaries included. The verdict is cached per digest and key set, so members
		// verifying the same digest with the same keys cost no further request.
		held = fmt.Errorf("revision %s is not rolled out, members stay on the revisions they have%s: %w", target.Name, r.stableNote(fleet), err)
		heldReason = reasonFor(err)
	}
	markHeld := func() {
		conditions.MarkFalse(fleet, meta.ReadyCondition, heldReason, "%s", held)
		conditions.MarkReconciling(fleet, v1alpha1.ProgressingWithRetryReason, "%s", held)
	}
	switch {
	case held == nil:
		fleet.Status.Target = target
	case fleet.Status.Target == nil:
		markHeld()
		return ctrl.Result{RequeueAfter: r.options.RetryInterval}, nil
	default:
		target = fleet.Status.Target
	}

	owned, err := r.ownedMembers(ctx, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}
	members, collisions, err := r.members(ctx, fleet, owned)
	if err != nil {
		var invalid *stageError
		if errors.As(err, &invalid) {
			conditions.MarkFalse(fleet, meta.ReadyCondition, invalid.reason, "%s", err)
			conditions.MarkStalled(fleet, invalid.reason, "%s", err)
			conditions.Delete(fleet, meta.ReconcilingCondition)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	present := make([]string, 0, len(members))
	for _, m := range members {
		present = append(present, m.partition)
	}
	order := partitionOrder(present, spec.Rollout.Partitions)
	stableName := ""
	if fleet.Status.Stable != nil {
		stableName = fleet.Status.Stable.Name
	}
	now := r.now()
	plan := planRollout(members, order, target.Name, stableName, spec.Rollout, fleet.Status.Partitions, now)

	targetSource := fleetRevisionSource{name: target.Name, image: target.Image, template: &spec.Template, overrides: spec.ConfigOverrides}
	var stableSource fleetRevisionSource
	if s := fleet.Status.Stable; s != nil {
		stableSource = fleetRevisionSource{name: s.Name, image: s.Image, template: &s.Template, overrides: s.ConfigOverrides}
	}
	problems := slices.Clone(collisions)
	for _, m := range members {
		var src fleetRevisionSource
		switch plan.assign[m.namespace] {
		case toTarget:
			src = targetSource
		case toStable:
			src = stableSource
		default:
			continue
		}
		if err := r.keepMember(ctx, fleet, src, m, now); err != nil {
			problems = append(problems, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: m.partition, Reason: memberErrorReason(err), Message: err.Error()})
		}
	}
	if err := r.removeStrayMembers(ctx, members, collisions, owned); err != nil {
		return ctrl.Result{}, err
	}

	r.report(fleet, plan, problems, now)
	if plan.complete && (fleet.Status.Stable == nil || fleet.Status.Stable.Name != target.Name) {
		fleet.Status.Stable = &v1alpha1.FleetStableRevision{FleetRevision: *target, Template: *spec.Template.DeepCopy()}
		for _, o := range spec.ConfigOverrides {
			fleet.Status.Stable.ConfigOverrides = append(fleet.Status.Stable.ConfigOverrides, *o.DeepCopy())
		}
	}
	requeue := jittered(interval)
	if plan.wakeAfter > 0 {
		requeue = min(requeue, plan.wakeAfter)
	}
	if len(problems) > 0 || held != nil {
		requeue = min(requeue, r.options.RetryInterval)
	}
	if held != nil {
		markHeld()
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// finalize deletes every member and removes the finalizer once they are gone (each member's
// own finalizer tears its objects down first). Member deletions wake the fleet.
func (r *fleetReconciler) finalize(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, patcher *patch.SerialPatcher) (ctrl.Result, error) {
	owned, err := r.ownedMembers(ctx, fleet)
	if err != nil {
		return ctrl.Result{}, err
	}
	left := len(owned)
	for _, p := range owned {
		if p.DeletionTimestamp.IsZero() {
			if err := r.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete member %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	if left > 0 {
		conditions.MarkFalse(fleet, meta.ReadyCondition, v1alpha1.DeletingReason, "waiting for %d member(s) to be torn down", left)
		if err := patcher.Patch(ctx, fleet, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(fieldOwner)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		return ctrl.Result{RequeueAfter: r.options.RetryInterval}, nil
	}
	r.writes.forget(fleet.Name)
	r.statuses.Delete(fleet.UID)
	r.own.fleetMembers.DeletePartialMatch(map[string]string{"fleet": fleet.Name})
	controllerutil.RemoveFinalizer(fleet, v1alpha1.FinalizerName)
	if err := patcher.Patch(ctx, fleet, patch.WithFieldOwner(fieldOwner)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// fleetVerifyField is where a fleet's verification settings are: the template's, which its
// members verify with too.
const fleetVerifyField = "spec.template.spec.verify"

// stableNote names the stable revision, which members the rollout has not reached stay on.
func (r *fleetReconciler) stableNote(fleet *v1alpha1.HostedClusterPackage) string {
	if fleet.Status.Stable == nil {
		return ""
	}
	return " (stable revision " + fleet.Status.Stable.Name + ")"
}

// resolveTarget resolves the template's tag, once per interval for the whole fleet, and names
// the revision it makes with the template. It also returns the image pinned to the digest and
// the credentials it was resolved with, to verify it.
func (r *fleetReconciler) resolveTarget(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, lastHandled string) (*v1alpha1.FleetRevision, source.Reference, source.Credentials, error) {
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
	if token, ok := meta.ReconcileAnnotationValue(fleet.GetAnnotations()); ok && token != lastHandled {
		// A request is answered by any resolution made after it (Flux's tokens are times).
		maxAge = 0
		if requested, err := time.Parse(time.RFC3339Nano, token); err == nil {
			maxAge = max(r.now().Sub(requested), 0)
		}
	}
	digest, err := r.source.ResolveWithin(ctx, ref, creds, maxAge)
	if err != nil {
		return nil, none, nil, pullFailed(err)
	}
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
func (r *fleetReconciler) members(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, owned []*v1alpha1.Package) ([]*fleetMember, []v1alpha1.MemberStatus, error) {
	selector := labels.Everything()
	if fleet.Spec.HostedClusterSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(fleet.Spec.HostedClusterSelector); err != nil {
			return nil, nil, &stageError{reason: InvalidSpecReason, err: fmt.Errorf("spec.hostedClusterSelector: %w", err)}
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
	owners := map[string]types.NamespacedName{}
	ownerErrs := map[string]error{}
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
		m := &fleetMember{namespace: hosted.ControlPlaneNamespace(hc.GetNamespace(), hc.GetName()), labels: hc.GetLabels()}
		if p := fleet.Spec.Rollout.Partitions; p != nil {
			m.partition = hc.GetLabels()[p.LabelKey]
		}
		if candidates := mapped[m.namespace]; len(candidates) > 1 {
			if _, seen := owners[m.namespace]; !seen {
				// Uncached and metadata only, for the rare namespace several clusters map to.
				owner, err := hosted.OwnerOfNamespace(ctx, r.apiReader, m.namespace, candidates)
				var ambiguous *hosted.AmbiguousError
				if err != nil && !errors.As(err, &ambiguous) {
					return nil, nil, err
				}
				owners[m.namespace], ownerErrs[m.namespace] = owner, err
			}
			self := types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()}
			msg := ""
			switch owner := owners[m.namespace]; {
			case ownerErrs[m.namespace] != nil:
				msg = ownerErrs[m.namespace].Error()
			case owner != self:
				msg = fmt.Sprintf("HostedCluster %s maps to namespace %s, which belongs to HostedCluster %s (its HostedControlPlane names it)", self, m.namespace, owner)
			}
			if msg != "" {
				collisions = append(collisions, v1alpha1.MemberStatus{Namespace: m.namespace, Partition: m.partition, Reason: v1alpha1.CollisionReason,
					Message: msg + "; no member is written for it, and a member there is left as it is"})
				continue
			}
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

// ownedMembers lists the fleet's members from the cache: Packages named like the fleet,
// labelled with it and owned by it. Read once per reconcile and shared by its steps.
func (r *fleetReconciler) ownedMembers(ctx context.Context, fleet *v1alpha1.HostedClusterPackage) ([]*v1alpha1.Package, error) {
	list := &v1alpha1.PackageList{}
	if err := r.client.List(ctx, list, client.MatchingLabels{v1alpha1.FleetLabel: fleet.Name}); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	var owned []*v1alpha1.Package
	for i := range list.Items {
		if p := &list.Items[i]; p.Name == fleet.Name && isOwnedBy(p, fleet) {
			owned = append(owned, p)
		}
	}
	return owned, nil
}

func isOwnedBy(p *v1alpha1.Package, fleet *v1alpha1.HostedClusterPackage) bool {
	for _, ref := range p.OwnerReferences {
		if ref.UID == fleet.UID {
			return true
		}
	}
	return false
}

// keepMember creates or corrects one member; a member that already is what it should be costs
// no request.
func (r *fleetReconciler) keepMember(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, src fleetRevisionSource, m *fleetMember, now time.Time) error {
	desired, err := desiredMember(fleet, src, m, now)
	if err != nil {
		return &stageError{reason: v1alpha1.InvalidConfigReason, err: err}
	}
	if m.pending && m.revision() == src.name {
		return nil // written moments ago; the cache has not caught up
	}
	if m.pkg != nil && !m.pending && memberUpToDate(m.pkg, desired) {
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
	generation, err := writeMember(ctx, r.client, existing, desired)
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
func (r *fleetReconciler) removeStrayMembers(ctx context.Context, members []*fleetMember, collisions []v1alpha1.MemberStatus, owned []*v1alpha1.Package) error {
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
		return "NamespaceNotFound"
	}
	return "MemberWriteFailed"
}

// report writes the fleet's status from the plan, with events and metrics for what changed.
func (r *fleetReconciler) report(fleet *v1alpha1.HostedClusterPackage, plan rolloutPlan, problems []v1alpha1.MemberStatus, now time.Time) {
	st := &fleet.Status
	r.announcePartitions(fleet, st.Partitions, plan.partitions, now)
	st.Partitions = plan.partitions
	st.MemberCounts = plan.counts
	st.Progress = fmt.Sprintf("%d/%d/%d", plan.counts.Updated, plan.counts.Ready, plan.counts.Total)
	st.CurrentPartition = plan.current
	st.InProgress = bounded(plan.inProgress)
	st.FailedMembers = bounded(append(slices.Clone(plan.failed), problems...))
	for state, n := range map[string]int32{"total": plan.counts.Total, "updated": plan.counts.Updated, "ready": plan.counts.Ready, "failed": plan.counts.Failed} {
		r.own.fleetMembers.WithLabelValues(fleet.Name, state).Set(float64(n))
	}

	target := st.Target.Name
	where := func() string {
		if plan.current == "" {
			return ""
		}
		return fmt.Sprintf("partition %s: ", partitionName(plan.current))
	}
	switch {
	case plan.halted:
		msg := fmt.Sprintf("rollout of %s halted in partition %s: %d member(s) failed (spec.rollout.failureThreshold): %s",
			target, partitionName(plan.current), len(plan.failed), describeMembers(plan.failed))
		conditions.MarkFalse(fleet, meta.ReadyCondition, RolloutHaltedReason, "%s", msg)
		conditions.MarkStalled(fleet, RolloutHaltedReason, "%s", msg)
		conditions.Delete(fleet, meta.ReconcilingCondition)
	case plan.counts.Total == 0 && len(problems) == 0:
		conditions.MarkTrue(fleet, meta.ReadyCondition, v1alpha1.ReconciliationSucceededReason, "no HostedCluster matches spec.hostedClusterSelector: 0 members")
		conditions.Delete(fleet, meta.ReconcilingCondition)
	case len(problems) > 0:
		msg := fmt.Sprintf("%d member(s) cannot be kept: %s", len(problems), describeMembers(problems))
		conditions.MarkFalse(fleet, meta.ReadyCondition, MembersFailedReason, "%s", msg)
		conditions.MarkReconciling(fleet, MembersFailedReason, "%s", msg)
	case plan.complete:
		conditions.MarkTrue(fleet, meta.ReadyCondition, v1alpha1.ReconciliationSucceededReason, "%d member(s) Ready on revision %s", plan.counts.Total, target)
		conditions.Delete(fleet, meta.ReconcilingCondition)
	case fleet.Spec.Rollout.Paused:
		msg := fmt.Sprintf("%srollout of %s paused (spec.rollout.paused): %s updated/ready/total", where(), target, st.Progress)
		conditions.MarkFalse(fleet, meta.ReadyCondition, RolloutPausedReason, "%s", msg)
		conditions.Delete(fleet, meta.ReconcilingCondition)
	default:
		msg := fmt.Sprintf("%srolling out %s: %s updated/ready/total", where(), target, st.Progress)
		conditions.MarkFalse(fleet, meta.ReadyCondition, RolloutProgressingReason, "%s", msg)
		conditions.MarkReconciling(fleet, RolloutProgressingReason, "%s", msg)
	}
}

// announceFleet emits an event when Ready changes status or reason: progress within a rollout
// is told by the partition events, not by one event per member.
func announceFleet(rec record.EventRecorder, fleet *v1alpha1.HostedClusterPackage, old *metav1.Condition) {
	now := conditions.Get(fleet, meta.ReadyCondition)
	if now == nil || (old != nil && old.Status == now.Status && old.Reason == now.Reason) {
		return
	}
	eventType := corev1.EventTypeNormal
	switch now.Reason {
	case RolloutProgressingReason, RolloutPausedReason, v1alpha1.DeletingReason, v1alpha1.ReconciliationSucceededReason:
	default:
		eventType = corev1.EventTypeWarning
	}
	rec.Event(fleet, eventType, now.Reason, now.Message)
}

// announcePartitions emits an event per partition transition: start, finish, halt, resume.
func (r *fleetReconciler) announcePartitions(fleet *v1alpha1.HostedClusterPackage, before, after []v1alpha1.PartitionStatus, now time.Time) {
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
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, "RolloutResumed", "partition %s: rollout of %s resumed", name, target)
			} else {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, "PartitionStarted", "partition %s: rolling out %s", name, target)
			}
		case v1alpha1.PartitionHalted:
			r.recorder.Eventf(fleet, corev1.EventTypeWarning, RolloutHaltedReason, "partition %s: rollout of %s halted", name, target)
		case v1alpha1.PartitionComplete:
			if seen && prev.State != v1alpha1.PartitionPending {
				r.recorder.Eventf(fleet, corev1.EventTypeNormal, "PartitionComplete", "partition %s: every member Ready on %s", name, target)
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

func bounded(ms []v1alpha1.MemberStatus) []v1alpha1.MemberStatus {
	if len(ms) > maxListedMembers {
		ms = ms[:maxListedMembers]
	}
	for i := range ms {
		if len(ms[i].Message) > 512 {
			ms[i].Message = ms[i].Message[:512] + "…"
		}
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

// membersFleet maps a member Package to its fleet.
func membersFleet(_ context.Context, o client.Object) []ctrl.Request {
	name, ok := o.GetLabels()[v1alpha1.FleetLabel]
	if !ok {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Name: name}}}
}
