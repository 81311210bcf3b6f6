package fleet

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/reconciler/reconcilertest"
	"pkgsync.dev/pkgsync/internal/verify"
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
)

// TestFleetOutcome: what a fleet's plan and the members it could not keep make of its Ready.
func TestFleetOutcome(t *testing.T) {
	t.Parallel()
	failed := []v1alpha1.MemberStatus{{Namespace: "clusters-a", Reason: v1alpha1.CollisionReason, Message: "taken"}}
	cases := []struct {
		name     string
		plan     rollout.Plan
		problems []v1alpha1.MemberStatus
		paused   bool
		state    reconciler.OutcomeState
		reason   string
	}{
		{"halted wins over problems", rollout.Plan{Halted: true, Current: "canary", Failed: failed, Counts: v1alpha1.MemberCounts{Total: 2}}, failed, false, reconciler.OutcomeStalled, v1alpha1.RolloutHaltedReason},
		{"no member selected", rollout.Plan{Complete: true}, nil, false, reconciler.OutcomeSucceeded, v1alpha1.ReconciliationSucceededReason},
		{"no member but a collision", rollout.Plan{Complete: true}, failed, false, reconciler.OutcomeProgressing, v1alpha1.MembersFailedReason},
		{"members not kept", rollout.Plan{Counts: v1alpha1.MemberCounts{Total: 2}}, failed, false, reconciler.OutcomeProgressing, v1alpha1.MembersFailedReason},
		{"complete", rollout.Plan{Complete: true, Counts: v1alpha1.MemberCounts{Total: 2, Ready: 2, Updated: 2}}, nil, true, reconciler.OutcomeSucceeded, v1alpha1.ReconciliationSucceededReason},
		{"paused", rollout.Plan{Current: "late", Counts: v1alpha1.MemberCounts{Total: 2}}, nil, true, reconciler.OutcomeWaiting, v1alpha1.RolloutPausedReason},
		{"rolling out", rollout.Plan{Current: "late", Counts: v1alpha1.MemberCounts{Total: 2}}, nil, false, reconciler.OutcomeProgressing, v1alpha1.RolloutProgressingReason},
		{"complete, a member waiting for its cluster's window", rollout.Plan{Complete: true, Counts: v1alpha1.MemberCounts{Total: 3, Ready: 3, Updated: 2, WindowHeld: 1}}, nil, false,
			reconciler.OutcomeSucceeded, v1alpha1.ReconciliationSucceededReason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &v1alpha1.HostedClusterPackage{}
			f.Spec.Rollout.Paused = c.paused
			f.Status.Target = &v1alpha1.FleetRevision{Name: "abc-def"}
			o := fleetOutcome(f, c.plan, c.problems)
			assert.Equal(t, c.state, o.State)
			if c.state != reconciler.OutcomeSucceeded {
				assert.Equal(t, c.reason, o.Reason)
			}
			assert.NotEmpty(t, o.Message)
			if c.plan.Counts.WindowHeld > 0 {
				assert.Contains(t, o.Message, "2 member(s) Ready on revision abc-def; 0 blocked, 0 held, 1 waiting for a maintenance window of their HostedCluster")
				assert.Contains(t, o.Message, "status.windowHeldMembers")
			}
		})
	}
}

// TestFleetRequeue: the interval, brought forward by the plan's wake-up and by a failure.
func TestFleetRequeue(t *testing.T) {
	t.Parallel()
	const interval, retry = time.Hour, 10 * time.Second
	assert.GreaterOrEqual(t, fleetRequeue(interval, 0, false, retry), interval)
	assert.Equal(t, time.Minute, fleetRequeue(interval, time.Minute, false, retry))
	assert.Equal(t, retry, fleetRequeue(interval, time.Minute, true, retry))
	assert.Equal(t, time.Second, fleetRequeue(interval, time.Second, true, retry))
}

// fleetFixture is a fleet's steps over a fake management cluster and the in-process registry
// of verifytest.NewFixture, whose packages the fleet reads with a pull secret of the controller's
// namespace.
type fleetFixture struct {
	*verifytest.Fixture
	pullSecret *corev1.Secret
}

func newFleetFixture(t *testing.T) *fleetFixture {
	t.Helper()
	f := &fleetFixture{Fixture: verifytest.NewFixture(t)}
	auth := base64.StdEncoding.EncodeToString([]byte("reader:secret"))
	f.pullSecret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: verifytest.ControllerNamespace, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + f.Reg.Host + `":{"auth":"` + auth + `"}}}`)}}
	return f
}

func (f *fleetFixture) steps(t *testing.T, require bool, objs ...client.Object) (*fleetSteps, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	assert.NoError(t, clientgoscheme.AddToScheme(scheme))
	assert.NoError(t, v1alpha1.AddToScheme(scheme))
	objs = append(append(objs, f.pullSecret), f.Objects...)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(verifytest.Copies(objs)...).
		WithIndex(&v1alpha1.HostedClusterPackage{}, fleetDependsOnIndex, indexFleetDependsOn).Build()
	return &fleetSteps{
		client: c, apiReader: c, source: f.Src, verifier: verify.NewVerifier(c, c, verifytest.ControllerNamespace, require),
		recorder: record.NewFakeRecorder(10), own: reconciler.NewMetrics(), hostedClusterAPI: true, now: time.Now,
		options:  reconciler.Options{Namespace: verifytest.ControllerNamespace, RetryInterval: 7 * time.Second, ProgressInterval: 3 * time.Second},
		analyses: newAnalyses(nil),
	}, c
}

// fleetOn is a fleet of image (the template's tag) verified with verify, with the target and
// stable revision it had (nil: none).
func fleetOn(image string, verify *v1alpha1.Verification, had *v1alpha1.FleetRevision) *v1alpha1.HostedClusterPackage {
	fleet := &v1alpha1.HostedClusterPackage{ObjectMeta: metav1.ObjectMeta{Name: "addon", UID: "fleet-uid", Generation: 1}}
	fleet.Spec.Template.Spec = v1alpha1.PackageSpec{Image: image, Verify: verify, PullSecretRef: &meta.LocalObjectReference{Name: "pull"}}
	if had != nil {
		fleet.Status.Target = had.DeepCopy()
		fleet.Status.Stable = &v1alpha1.FleetStableRevision{FleetRevision: *had.DeepCopy()}
	}
	return fleet
}

// TestFleetTargetChoice: the revision a fleet rolls out when the template's tag resolves and
// verifies, and the one it keeps (with the outcome saying why) when it does not: a registry
// outage or an unsigned push never reaches a member, and never freezes the fleet.
func TestFleetTargetChoice(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	had := &v1alpha1.FleetRevision{Name: "old-rev", Image: f.Unsigned.String(), Digest: f.Unsigned.Digest}
	signedTag := f.Reg.Host + "/addons/signed:v1"
	missingTag := f.Reg.Host + "/addons/signed:v9"
	tests := []struct {
		name    string
		fleet   *v1alpha1.HostedClusterPackage
		require bool

		wantTarget  string // digest of the target returned, "" for none
		wantStatus  string // digest of status.target afterwards, "" for none
		heldReason  string // reason of the held outcome, "" when the tag's revision is the target
		heldSays    string
		refusedWith string // reason of a refusal of the spec
	}{
		{name: "resolved, nothing to verify: the tag's revision", fleet: fleetOn(signedTag, nil, had),
			wantTarget: f.Signed.Digest, wantStatus: f.Signed.Digest},
		{name: "resolved and verified: the tag's revision", fleet: fleetOn(signedTag, verifytest.KeysOf("keys-a"), had),
			wantTarget: f.Signed.Digest, wantStatus: f.Signed.Digest},
		{name: "first target, resolved and verified", fleet: fleetOn(signedTag, verifytest.KeysOf("keys-a"), nil),
			wantTarget: f.Signed.Digest, wantStatus: f.Signed.Digest},
		{name: "verification fails: the revision it had, retried", fleet: fleetOn(signedTag, verifytest.KeysOf("keys-b"), had),
			wantTarget: had.Digest, wantStatus: had.Digest, heldReason: v1alpha1.VerificationFailedReason, heldSays: "members stay on the revisions they have (stable revision old-rev)"},
		{name: "verification fails, no target yet: none", fleet: fleetOn(signedTag, verifytest.KeysOf("keys-b"), nil),
			heldReason: v1alpha1.VerificationFailedReason, heldSays: "is not rolled out"},
		{name: "the tag does not resolve: the revision it had", fleet: fleetOn(missingTag, nil, had),
			wantTarget: had.Digest, wantStatus: had.Digest, heldReason: v1alpha1.PullFailedReason, heldSays: "v9"},
		{name: "the tag does not resolve, no target yet: none", fleet: fleetOn(missingTag, nil, nil),
			heldReason: v1alpha1.PullFailedReason},
		{name: "an image that does not parse: held", fleet: fleetOn("not a reference", nil, had),
			wantTarget: had.Digest, wantStatus: had.Digest, heldReason: v1alpha1.PullFailedReason, heldSays: "spec.template.spec.image"},
		{name: "signatures required and no spec.verify: the spec is refused", fleet: fleetOn(signedTag, nil, had), require: true,
			wantStatus: had.Digest, refusedWith: v1alpha1.VerificationRequiredReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := f.steps(t, tt.require)
			target, held, err := r.chooseTarget(t.Context(), tt.fleet, "")
			if tt.refusedWith != "" {
				var stage *reconciler.StageError
				require.ErrorAs(t, err, &stage)
				assert.Equal(t, tt.refusedWith, stage.Reason)
			} else {
				require.NoError(t, err)
			}
			if tt.wantTarget == "" {
				assert.Nil(t, target)
			} else if assert.NotNil(t, target) {
				assert.Equal(t, tt.wantTarget, target.Digest)
			}
			if tt.wantStatus == "" {
				assert.Nil(t, tt.fleet.Status.Target)
			} else if assert.NotNil(t, tt.fleet.Status.Target) {
				assert.Equal(t, tt.wantStatus, tt.fleet.Status.Target.Digest, "status.target")
			}
			if tt.heldReason == "" {
				assert.Nil(t, held)
				return
			}
			if assert.NotNil(t, held) {
				assert.Equal(t, reconciler.OutcomeRetrying, held.State)
				assert.Equal(t, tt.heldReason, held.Reason)
				assert.Contains(t, held.Message, tt.heldSays)
			}
		})
	}
}

// TestFleetPassStops: the passes that stop before any member is looked at, and what the
// lifecycle makes of them: the fleet's conditions and when it comes back (stalls at the
// interval, like every stall; a wait for a first target at the retry interval).
func TestFleetPassStops(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	signedTag := f.Reg.Host + "/addons/signed:v1"
	tests := []struct {
		name    string
		fleet   *v1alpha1.HostedClusterPackage
		noAPI   bool
		require bool

		want       reconcilertest.Conditions
		wantResult ctrl.Result
	}{
		{name: "no HostedCluster API: stalled, looked at again at the interval", fleet: fleetOn(signedTag, nil, nil), noAPI: true,
			want:       reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.HostedClusterAPIMissingReason, StalledBy: v1alpha1.HostedClusterAPIMissingReason},
			wantResult: ctrl.Result{RequeueAfter: time.Hour}},
		{name: "the spec refused: stalled, looked at again at the interval", fleet: fleetOn(signedTag, nil, nil), require: true,
			want:       reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.VerificationRequiredReason, StalledBy: v1alpha1.VerificationRequiredReason},
			wantResult: ctrl.Result{RequeueAfter: time.Hour}},
		{name: "no target yet: retried at the retry interval", fleet: fleetOn(signedTag, verifytest.KeysOf("keys-b"), nil),
			want:       reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.VerificationFailedReason, ReconcilingReason: v1alpha1.ProgressingWithRetryReason},
			wantResult: ctrl.Result{RequeueAfter: 7 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fleet.Finalizers = []string{v1alpha1.FinalizerName}
			tt.fleet.Spec.Template.Spec.Interval = &metav1.Duration{Duration: time.Hour}
			conditions.MarkStalled(tt.fleet, "Earlier", "earlier")
			r, c := f.stepsWith(t, nil, tt.fleet)
			r.verifier.Require = tt.require
			r.hostedClusterAPI = !tt.noAPI
			res, err := reconcileFleet(t, r, c, tt.fleet)
			require.NoError(t, err)
			assert.Equal(t, tt.wantResult, res)
			got := &v1alpha1.HostedClusterPackage{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(tt.fleet), got))
			reconcilertest.AssertConditions(t, got, tt.want)
		})
	}
}

// reconcileFleet runs one reconcile of fleet, as stored in c, through the lifecycle with r's steps.
func reconcileFleet(t *testing.T, r *fleetSteps, c client.Client, fleet *v1alpha1.HostedClusterPackage) (ctrl.Result, error) {
	t.Helper()
	l := reconciler.New(reconciler.Base{Client: c, Recorder: record.NewFakeRecorder(10)}, v1alpha1.HostedClusterPackageKind,
		func() *v1alpha1.HostedClusterPackage { return &v1alpha1.HostedClusterPackage{} }, r.steps())
	return l.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fleet)})
}

// TestFleetFinalize: a fleet being deleted deletes its members (only its own) and waits for
// them; the finalizer goes once none is left.
func TestFleetFinalize(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	member := func(ns string, owner types.UID) *v1alpha1.Package {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addon", Labels: map[string]string{v1alpha1.FleetLabel: "addon"}}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "HostedClusterPackage", Name: "addon", UID: owner}}
		}
		return p
	}
	tests := []struct {
		name          string
		members       []client.Object
		wantResult    ctrl.Result
		wantFinalizer bool
		wantDeleted   []string
		wantKept      []string
	}{
		{name: "no member: the finalizer goes"},
		{name: "members: deleted, waited for at the progress interval", members: []client.Object{member("clusters-a", "fleet-uid"), member("clusters-b", "fleet-uid")},
			wantResult: ctrl.Result{RequeueAfter: 3 * time.Second}, wantFinalizer: true, wantDeleted: []string{"clusters-a", "clusters-b"}},
		{name: "a Package with the fleet's label it does not own is left alone", members: []client.Object{member("clusters-a", "other-uid")},
			wantKept: []string{"clusters-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fleet := fleetOn("example.com/addon:v1", nil, nil)
			fleet.Finalizers = []string{v1alpha1.FinalizerName}
			fleet.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			r, c := f.steps(t, false, append(tt.members, fleet)...)
			res, err := r.finalize(t.Context(), fleet)
			require.NoError(t, err)
			assert.Equal(t, tt.wantResult, res)
			stored := &v1alpha1.HostedClusterPackage{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(fleet), stored); !apierrors.IsNotFound(err) {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantFinalizer, controllerutil.ContainsFinalizer(stored, v1alpha1.FinalizerName), "the fleet's finalizer on the API server")
			if tt.wantFinalizer {
				reconcilertest.AssertConditions(t, fleet, reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.DeletingReason, ReconcilingReason: v1alpha1.DeletingReason})
			}
			for _, ns := range tt.wantDeleted {
				err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "addon"}, &v1alpha1.Package{})
				assert.True(t, apierrors.IsNotFound(err), "member in %s deleted: %v", ns, err)
			}
			for _, ns := range tt.wantKept {
				assert.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "addon"}, &v1alpha1.Package{}), "%s kept", ns)
			}
		})
	}
}

// hostedClusterObj is an Available HostedCluster as the fleet reads it (unstructured: pkgsync
// does not import HyperShift's types); one that is not Available would be a blocked member.
func hostedClusterObj(namespace, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hosted.HostedClusterGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{
		"type": "Available", "status": "True", "reason": "AsExpected", "message": "The hosted control plane is available",
		"lastTransitionTime": "2026-01-01T00:00:00Z",
	}}, "status", "conditions")
	return u
}

// TestFleetPass: what a pass that has a target does with the HostedClusters it finds: a member
// for each selected one, on the target; none where another Package holds the name; stray
// members deleted; and what that makes of Ready and the requeue.
func TestFleetPass(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t)
	signedTag := f.Reg.Host + "/addons/signed:v1"
	had := &v1alpha1.FleetRevision{Name: "old-rev", Image: f.Unsigned.String(), Digest: f.Unsigned.Digest}
	owned := func(ns string) *v1alpha1.Package {
		return &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addon", Labels: map[string]string{v1alpha1.FleetLabel: "addon"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "HostedClusterPackage", Name: "addon", UID: "fleet-uid"}}}}
	}
	selected := map[string]string{"tier": "prod"}
	tests := []struct {
		name    string
		verify  *v1alpha1.Verification
		objects []client.Object

		want        reconcilertest.Conditions
		wantRequeue time.Duration
		wantMembers map[string]string // namespace → digest the member names
		wantGone    []string          // namespaces whose member is deleted
	}{
		{name: "no HostedCluster selected: Ready with 0 members, a stray member deleted",
			objects: []client.Object{hostedClusterObj("clusters", "other", nil), owned("clusters-gone")},
			want:    reconcilertest.Conditions{Ready: metav1.ConditionTrue, ReadyReason: v1alpha1.ReconciliationSucceededReason}, wantRequeue: time.Hour,
			wantGone: []string{"clusters-gone"}},
		{name: "a selected HostedCluster gets a member on the target",
			objects: []client.Object{hostedClusterObj("clusters", "a", selected)},
			want:    reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.RolloutProgressingReason, ReconcilingReason: v1alpha1.RolloutProgressingReason}, wantRequeue: time.Hour,
			wantMembers: map[string]string{"clusters-a": f.Signed.Digest}},
		{name: "a Package of the fleet's name that is not the fleet's: no member, retried",
			objects: []client.Object{hostedClusterObj("clusters", "a", selected), &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters-a", Name: "addon"}}},
			want:    reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.MembersFailedReason, ReconcilingReason: v1alpha1.MembersFailedReason}, wantRequeue: 7 * time.Second,
			wantMembers: map[string]string{"clusters-a": ""}},
		{name: "the tag's revision fails verification: members on the revision the fleet had, retried",
			verify:  verifytest.KeysOf("keys-b"),
			objects: []client.Object{hostedClusterObj("clusters", "a", selected)},
			want:    reconcilertest.Conditions{Ready: metav1.ConditionFalse, ReadyReason: v1alpha1.VerificationFailedReason, ReconcilingReason: v1alpha1.ProgressingWithRetryReason}, wantRequeue: 7 * time.Second,
			wantMembers: map[string]string{"clusters-a": had.Digest}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, c := f.steps(t, false, tt.objects...)
			fleet := fleetOn(signedTag, tt.verify, had)
			fleet.Spec.HostedClusterSelector = &metav1.LabelSelector{MatchLabels: selected}
			fleet.Spec.Template.Spec.Interval = &metav1.Duration{Duration: time.Hour}
			res, err := r.pass(t.Context(), fleet, nil, "")
			require.NoError(t, err)
			assert.InDelta(t, float64(tt.wantRequeue), float64(res.RequeueAfter), float64(tt.wantRequeue)/10)
			reconcilertest.AssertConditions(t, fleet, tt.want)
			for ns, digest := range tt.wantMembers {
				var p v1alpha1.Package
				require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "addon"}, &p))
				if digest == "" {
					assert.Empty(t, p.Spec.Image, "the Package that is not the fleet's is left alone")
					continue
				}
				assert.Equal(t, "addon", p.Labels[v1alpha1.FleetLabel])
				assert.True(t, strings.HasSuffix(p.Spec.Image, "@"+digest), "member %s on %s, not %s", ns, digest, p.Spec.Image)
			}
			for _, ns := range tt.wantGone {
				err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "addon"}, &v1alpha1.Package{})
				assert.True(t, apierrors.IsNotFound(err), "stray member in %s deleted: %v", ns, err)
			}
		})
	}
}

func TestStandingRejection(t *testing.T) {
	t.Parallel()
	target := &v1alpha1.FleetRevision{Name: "abc-123", Digest: "sha256:abc"}
	now := time.Now()
	tests := []struct {
		name        string
		target      *v1alpha1.FleetRevision
		annotation  string
		lastHandled string
		want        string
	}{
		{"holds while the tag resolves to it and no request waits", target, "t1", "t1", "abc-123"},
		{"dropped when the tag moves to another digest", &v1alpha1.FleetRevision{Name: "def-123", Digest: "sha256:def"}, "", "", ""},
		{"dropped when a reconcile is requested", target, "t2", "t1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fleet := &v1alpha1.HostedClusterPackage{}
			if tt.annotation != "" {
				fleet.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": tt.annotation}
			}
			fleet.Status.Rejected = &v1alpha1.FleetRejectedRevision{FleetRevision: *target, Reason: v1alpha1.RolloutHaltedReason}
			assert.Equal(t, tt.want, standingRejection(fleet, tt.target, tt.lastHandled, now))
			assert.Equal(t, tt.want == "", fleet.Status.Rejected == nil, "the status keeps a rejection exactly while it holds")
		})
	}
}
