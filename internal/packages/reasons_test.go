package packages

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
)

// TestReasonForEveryTypedError: each typed error the controller's steps return maps to its
// documented reason, and the reason to Stalled (only a change of spec or package helps) or to
// a retry.
func TestReasonForEveryTypedError(t *testing.T) {
	t.Parallel()
	stage := func(reason string) error {
		return fmt.Errorf("wrapped: %w", &reconciler.StageError{Reason: reason, Err: errors.New("cause")})
	}
	tests := []struct {
		err    error
		reason string
		stalls bool
	}{
		{stage(v1alpha1.PullFailedReason), v1alpha1.PullFailedReason, false},
		{stage(v1alpha1.NoMatchingVersionReason), v1alpha1.NoMatchingVersionReason, false},
		{stage(v1alpha1.InvalidVersionRangeReason), v1alpha1.InvalidVersionRangeReason, true},
		{stage(v1alpha1.VerificationFailedReason), v1alpha1.VerificationFailedReason, false},
		{stage(v1alpha1.VerificationRequiredReason), v1alpha1.VerificationRequiredReason, true},
		{stage(v1alpha1.AuthenticationFailedReason), v1alpha1.AuthenticationFailedReason, false},
		{stage(v1alpha1.InvalidConfigReason), v1alpha1.InvalidConfigReason, true},
		{stage(v1alpha1.RenderFailedReason), v1alpha1.RenderFailedReason, true},
		{stage(v1alpha1.ApplyFailedReason), v1alpha1.ApplyFailedReason, false},
		{constraintViolated(&render.ConstraintError{Constraint: render.ConstraintPlatform}), v1alpha1.PlatformConstraintViolatedReason, false},
		{constraintViolated(&render.ConstraintError{Constraint: render.ConstraintPlatformVersion}), v1alpha1.PlatformVersionConstraintViolatedReason, false},
		{constraintViolated(&render.ConstraintError{Constraint: render.ConstraintUniqueInScope}), v1alpha1.UniqueInScopeConstraintViolatedReason, false},
		// The type of the error wins over the step that tagged it.
		{&reconciler.StageError{Reason: v1alpha1.PullFailedReason, Err: &render.ConfigError{Field: "x"}}, v1alpha1.InvalidConfigReason, true},
		{&reconciler.NotHostedError{Namespace: "team", Why: "ambiguous"}, v1alpha1.NotHostedControlPlaneReason, true},
		{&apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Err: &applier.PausedError{Cluster: "c/a"}}, v1alpha1.HostedClusterUnavailableReason, false},
		{&apply.TargetUnavailableError{Class: v1alpha1.ClassHostedCluster, Err: &hosted.UnavailableError{Err: errors.New("timeout")}}, v1alpha1.HostedClusterUnavailableReason, false},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			t.Parallel()
			got := reconciler.ReasonFor(tt.err)
			assert.Equal(t, tt.reason, got)
			assert.Equal(t, tt.stalls, reconciler.IsStalling(got), "stalls")
		})
	}
}
