package reconciler

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/cloudauth"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// ReasonFor maps an error from source, render, apply or hosted to the Ready condition reason a
// user acts on. This is the one place that mapping lives.
func ReasonFor(err error) string {
	var (
		configErr    *render.ConfigError
		renderErrs   render.Errors
		renderErr    *render.Error
		collision    *apply.CollisionError
		conflict     *apply.ConflictError
		immutable    *apply.ImmutableFieldError
		unavailable  *apply.TargetUnavailableError
		confined     *apply.ConfinementError
		registryResp *errcode.ErrorResponse
		stage        *StageError
		notHosted    *NotHostedError
		exchange     *cloudauth.Error
	)
	switch {
	case hosted.IsInsecureKubeconfig(err):
		return v1alpha1.InsecureKubeconfigReason
	case errors.As(err, &notHosted):
		return v1alpha1.NotHostedControlPlaneReason
	case errors.As(err, &confined):
		return v1alpha1.ScopeViolationReason
	case errors.As(err, &configErr):
		return v1alpha1.InvalidConfigReason
	case errors.As(err, &renderErrs), errors.As(err, &renderErr):
		return v1alpha1.RenderFailedReason
	case hosted.IsNoCredentials(err), errors.As(err, &unavailable):
		return v1alpha1.HostedClusterUnavailableReason
	case errors.As(err, &collision):
		return v1alpha1.CollisionReason
	case errors.As(err, &conflict):
		return v1alpha1.ConflictReason
	case errors.As(err, &immutable):
		return v1alpha1.ImmutableFieldReason
	case errors.As(err, &exchange):
		return v1alpha1.AuthenticationFailedReason
	case errors.As(err, &registryResp) && (registryResp.StatusCode == 401 || registryResp.StatusCode == 403),
		errors.Is(err, source.ErrAuthenticationRequired):
		return v1alpha1.AuthenticationFailedReason
	case errors.As(err, &stage):
		return stage.Reason
	case apierrors.IsForbidden(err):
		return v1alpha1.ForbiddenReason
	}
	return v1alpha1.ApplyFailedReason
}

// StageError tags an error with the reason of the reconcile step that failed, for errors whose
// type alone does not tell (a registry timeout is a PullFailed, not an ApplyFailed).
type StageError struct {
	Reason string
	Err    error
}

func (e *StageError) Error() string { return e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// PullFailed tags a source error, with the controller's hint for the causes source reports.
func PullFailed(err error) error {
	return &StageError{Reason: v1alpha1.PullFailedReason, Err: WithRegistryHint(err)}
}

// registryHints says, for each cause source reports, what to do about it with this controller;
// source reports the cause only.
var registryHints = []struct {
	cause error
	hint  string
}{
	{source.ErrAuthenticationRequired, "give the credentials in a kubernetes.io/dockerconfigjson Secret named by spec.pullSecretRef (for a HostedClusterPackage, spec.template.spec.pullSecretRef, in the controller's namespace); with a cloud spec.provider, let its identity read the repository"},
	{source.ErrTLSVerification, "start the controller with --ca-file holding the registry's CA"},
	{source.ErrHTTPSRequired, "start the controller with --ca-file holding the registry's CA, which switches to HTTPS"},
	{source.ErrPlainHTTPAnswer, "start the controller with --plain-http-registry naming this registry"},
	{source.ErrLocalAddress, "only the operator can allow such a registry: start the controller with --local-registry naming it, or with --plain-http-registry if it serves plain HTTP (a redirect from HTTPS to plain HTTP is refused whatever the flags)"},
}

func WithRegistryHint(err error) error {
	for _, h := range registryHints {
		if errors.Is(err, h.cause) {
			return fmt.Errorf("%w (%s)", err, h.hint)
		}
	}
	return err
}

// IsStalling reports whether retrying cannot help until the spec or the package changes.
func IsStalling(reason string) bool {
	switch reason {
	case v1alpha1.RenderFailedReason, v1alpha1.InvalidConfigReason, v1alpha1.ScopeViolationReason,
		v1alpha1.InsecureKubeconfigReason, v1alpha1.NotHostedControlPlaneReason, v1alpha1.VerificationRequiredReason,
		v1alpha1.InvalidVersionRangeReason, v1alpha1.DependencyCycleReason, v1alpha1.InvalidDependencyReason,
		v1alpha1.InvalidSpecReason:
		return true
	}
	return false
}

// IsWaitingForInterval reports whether a failure depends on something that is only looked at
// again at the interval (a new tag in the registry), so retrying sooner cannot help.
func IsWaitingForInterval(reason string) bool {
	return reason == v1alpha1.NoMatchingVersionReason
}
