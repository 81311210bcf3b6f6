package reconciler

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

func TestReasonFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		reason string
		stalls bool
	}{
		{&render.ConfigError{Field: "config.replicas", Detail: "must be >= 1"}, v1alpha1.InvalidConfigReason, true},
		{render.Errors{&render.Error{File: "a.yaml", Err: errors.New("bad")}}, v1alpha1.RenderFailedReason, true},
		{fmt.Errorf("x: %w", &apply.ConfinementError{Objects: []string{"Namespace x (cluster-scoped)"}}), v1alpha1.ScopeViolationReason, true},
		{&hosted.InsecureKubeconfigError{Field: `users["a"].exec`}, v1alpha1.InsecureKubeconfigReason, true},
		{&NotHostedError{Namespace: "ns", Why: "no HostedCluster"}, v1alpha1.NotHostedControlPlaneReason, true},
		{&hosted.NoCredentialsError{Namespace: "ns", Secret: "s", Reason: "Secret not found"}, v1alpha1.HostedClusterUnavailableReason, false},
		{fmt.Errorf("phase x: %w", &apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Err: errors.New("refused")}), v1alpha1.HostedClusterUnavailableReason, false},
		{&StageError{Reason: v1alpha1.InvalidSpecReason, Err: errors.New("spec.ignoreFields[0].jsonPointers[0]: names the whole object")}, v1alpha1.InvalidSpecReason, true},
		{&apply.CollisionError{}, v1alpha1.CollisionReason, false},
		{&apply.ConflictError{}, v1alpha1.ConflictReason, false},
		{&apply.ImmutableFieldError{}, v1alpha1.ImmutableFieldReason, false},
		{PullFailed(&errcode.ErrorResponse{StatusCode: 401}), v1alpha1.AuthenticationFailedReason, false},
		{PullFailed(errors.New("connection refused")), v1alpha1.PullFailedReason, false},
		{PullFailed(fmt.Errorf("check access: %w", source.ErrAuthenticationRequired)), v1alpha1.AuthenticationFailedReason, false},
		{PullFailed(fmt.Errorf("list tags of r/x: %w", source.ErrLimit)), v1alpha1.PullFailedReason, false},
		{PullFailed(fmt.Errorf("resolve r/x:1: %w", source.ErrLocalAddress)), v1alpha1.PullFailedReason, false},
		{fmt.Errorf("phase x: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("RBAC"))), v1alpha1.ForbiddenReason, false},
		{errors.New("something else"), v1alpha1.ApplyFailedReason, false},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			got := ReasonFor(tc.err)
			assert.Equal(t, tc.reason, got)
			assert.Equal(t, tc.stalls, IsStalling(got))
		})
	}
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
		err := PullFailed(fmt.Errorf("pull r/x:1: %w", cause))
		assert.ErrorIs(t, err, cause)
		assert.Contains(t, err.Error(), hint)
		assert.NotContains(t, err.Error(), "docker login")
		assert.NotContains(t, err.Error(), "--plain-http ")
	}
}
