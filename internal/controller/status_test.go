package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

func TestInventoryRoundTrip(t *testing.T) {
	t.Parallel()
	inv := apply.Inventory{Phases: []apply.InventoryPhase{
		{Name: "rbac", Class: v1alpha1.ClassHostedCluster, Objects: []apply.ObjectRef{
			{Version: "v1", Kind: "Namespace", Name: "addon"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "addon"},
		}},
		{Name: "deploy", Objects: []apply.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Name: "op"}}},
	}}
	inv.Phases[1].Objects = append(inv.Phases[1].Objects,
		apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Name: "op2"},
		apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "clusters-a", Name: "c"},
		apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Name: "op3"})
	stored := inventoryToStatus(inv)
	assert.Equal(t, []v1alpha1.InventoryGroup{
		{Version: "v1", Kind: "Namespace", Names: []string{"addon"}},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Names: []string{"addon"}},
	}, stored.Phases[0].Groups)
	assert.Equal(t, []v1alpha1.InventoryGroup{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Names: []string{"op", "op2"}},
		{Version: "v1", Kind: "ConfigMap", Namespace: "clusters-a", Names: []string{"c"}},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "clusters-a", Names: []string{"op3"}},
	}, stored.Phases[1].Groups, "runs of one kind and namespace, in order")
	assert.Empty(t, stored.Phases[0].Objects)
	back, err := inventoryFromStatus(stored)
	require.NoError(t, err)
	assert.Equal(t, inv, back)

	// The format of earlier versions, one string per object, is read as it was.
	old := &v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{
		{Name: "rbac", Class: v1alpha1.ClassHostedCluster, Objects: []string{"/v1/Namespace//addon", "rbac.authorization.k8s.io/v1/ClusterRole//addon"}},
		{Name: "deploy", Objects: []string{"apps/v1/Deployment/clusters-a/op", "apps/v1/Deployment/clusters-a/op2", "/v1/ConfigMap/clusters-a/c", "apps/v1/Deployment/clusters-a/op3"}},
	}}
	back, err = inventoryFromStatus(old)
	require.NoError(t, err)
	assert.Equal(t, inv, back)

	assert.Nil(t, inventoryToStatus(apply.Inventory{}))
	_, err = inventoryFromStatus(&v1alpha1.Inventory{Phases: []v1alpha1.InventoryPhase{{Name: "x", Objects: []string{"not-an-id"}}}})
	assert.ErrorContains(t, err, "not-an-id")
}

func TestReasonFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		reason string
		stalls bool
	}{
		{&render.ConfigError{Field: "config.replicas", Detail: "must be >= 1"}, v1alpha1.InvalidConfigReason, true},
		{render.Errors{&render.Error{File: "a.yaml", Err: errors.New("bad")}}, v1alpha1.RenderFailedReason, true},
		{fmt.Errorf("x: %w", &apply.ScopeError{Objects: []string{"Namespace x (cluster-scoped)"}}), v1alpha1.ScopeViolationReason, true},
		{&hosted.InsecureKubeconfigError{Field: `users["a"].exec`}, v1alpha1.InsecureKubeconfigReason, true},
		{&notHostedError{namespace: "ns", why: "no HostedCluster"}, v1alpha1.NotHostedControlPlaneReason, true},
		{&hosted.NoCredentialsError{Namespace: "ns", Secret: "s", Reason: "Secret not found"}, v1alpha1.HostedClusterUnavailableReason, false},
		{fmt.Errorf("phase x: %w", &apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Err: errors.New("refused")}), v1alpha1.HostedClusterUnavailableReason, false},
		{&apply.CollisionError{}, v1alpha1.CollisionReason, false},
		{&apply.ConflictError{}, v1alpha1.ConflictReason, false},
		{&apply.ImmutableFieldError{}, v1alpha1.ImmutableFieldReason, false},
		{pullFailed(&errcode.ErrorResponse{StatusCode: 401}), v1alpha1.AuthenticationFailedReason, false},
		{pullFailed(errors.New("connection refused")), v1alpha1.PullFailedReason, false},
		{pullFailed(fmt.Errorf("check access: %w", source.ErrAuthenticationRequired)), v1alpha1.AuthenticationFailedReason, false},
		{pullFailed(fmt.Errorf("list tags of r/x: %w", source.ErrLimit)), v1alpha1.PullFailedReason, false},
		{pullFailed(fmt.Errorf("resolve r/x:1: %w", source.ErrLocalAddress)), v1alpha1.PullFailedReason, false},
		{fmt.Errorf("phase x: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("RBAC"))), v1alpha1.ForbiddenReason, false},
		{errors.New("something else"), v1alpha1.ApplyFailedReason, false},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			got := reasonFor(tc.err)
			assert.Equal(t, tc.reason, got)
			assert.Equal(t, tc.stalls, isStalling(got))
		})
	}
}

func TestPhasesToStatusCapsObjects(t *testing.T) {
	t.Parallel()
	res := &apply.Result{Phases: []apply.PhaseResult{
		{Name: "one", State: v1alpha1.PhaseComplete},
		{Name: "two", State: v1alpha1.PhaseProgressing},
		{Name: "three", State: v1alpha1.PhasePending},
	}}
	for i := range 15 {
		res.Phases[1].NotAvailable = append(res.Phases[1].NotAvailable, apply.ObjectStatus{Ref: apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Name: fmt.Sprint(i)}, Reason: "waiting"})
	}
	phases, current := phasesToStatus(res)
	assert.Equal(t, "two", current)
	require.Len(t, phases, 3)
	assert.Len(t, phases[1].NotAvailable, maxNotAvailable+1)
	assert.Equal(t, "and 5 more", phases[1].NotAvailable[maxNotAvailable].Reason)
}

func TestResolveMaxAge(t *testing.T) {
	t.Parallel()
	interval := 10 * time.Minute
	now := time.Date(2025, time.March, 4, 5, 6, 7, 0, time.UTC)
	pkg := func(mutate func(*v1alpha1.Package)) *v1alpha1.Package {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		p.Status.LastAttemptedRevision = "sha256:abc"
		p.Status.ObservedGeneration = 1
		mutate(p)
		return p
	}
	assert.Equal(t, interval/2, resolveMaxAge(pkg(func(*v1alpha1.Package) {}), "", interval, now), "interval reconcile")

	requested := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": now.Add(-3 * time.Second).Format(time.RFC3339Nano)}
	})
	assert.Equal(t, 3*time.Second, resolveMaxAge(requested, requested.Status.GetLastHandledReconcileRequest(), interval, now), "a resolution made after the request is fresh enough")

	future := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": now.Add(time.Minute).Format(time.RFC3339Nano)}
	})
	assert.Zero(t, resolveMaxAge(future, future.Status.GetLastHandledReconcileRequest(), interval, now), "a request from a clock ahead of ours asks the registry")

	handled := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": "token"}
		p.Status.LastHandledReconcileAt = "token"
	})
	assert.Equal(t, interval/2, resolveMaxAge(handled, handled.Status.GetLastHandledReconcileRequest(), interval, now), "an old request is not new")

	odd := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": "now please"}
	})
	assert.Zero(t, resolveMaxAge(odd, odd.Status.GetLastHandledReconcileRequest(), interval, now), "a request that is not a time asks the registry")

	fresh := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
	})
	assert.Equal(t, 4*time.Second, resolveMaxAge(fresh, fresh.Status.GetLastHandledReconcileRequest(), interval, now), "a new resource takes resolutions made since its creation, less the timestamp's second of precision")

	neverResolved := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	})
	assert.Equal(t, interval/2, resolveMaxAge(neverResolved, neverResolved.Status.GetLastHandledReconcileRequest(), interval, now), "a resource that never resolved (no tag in its range) still sees new tags every interval")

	justCreated := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now)
	})
	assert.Zero(t, resolveMaxAge(justCreated, justCreated.Status.GetLastHandledReconcileRequest(), interval, now), "within the creation second nothing cached is fresh enough")

	changed := pkg(func(p *v1alpha1.Package) {
		p.Generation = 2
		p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	})
	assert.Zero(t, resolveMaxAge(changed, changed.Status.GetLastHandledReconcileRequest(), interval, now), "a changed spec asks the registry")
}

// TestPullErrorsCarryTheControllersHint: source names causes, not flags; the controller says
// what to do with its own fields and flags, never the CLI's.
func TestPullErrorsCarryTheControllersHint(t *testing.T) {
	t.Parallel()
	for cause, hint := range map[error]string{
		source.ErrAuthenticationRequired: "spec.pullSecretRef",
		source.ErrTLSVerification:        "--ca-file",
		source.ErrHTTPSRequired:          "--ca-file",
		source.ErrPlainHTTPAnswer:        "--plain-http-registry",
		source.ErrLocalAddress:           "--local-registry",
	} {
		err := pullFailed(fmt.Errorf("pull r/x:1: %w", cause))
		assert.ErrorIs(t, err, cause)
		assert.Contains(t, err.Error(), hint)
		assert.NotContains(t, err.Error(), "docker login")
		assert.NotContains(t, err.Error(), "--plain-http ")
	}
}
