package packages

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/mirrors"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/verify"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// packageObject is what Package and ClusterPackage have in common.
type packageObject interface {
	client.Object
	conditions.Setter
	GetSpec() *v1alpha1.PackageSpec
	GetStatus() *v1alpha1.PackageStatus
}

// packageSteps are the steps of Packages (namespaced) and ClusterPackages within the shared
// lifecycle: resolve the tag, pull and render when the digest or config changed, apply the
// phases, prune, report.
type packageSteps[T packageObject] struct {
	// apiReader reads pull secrets without caching every Secret of the cluster.
	apiReader client.Reader
	source    *source.Client
	options   reconciler.Options
	applier   *applier.Applier
	renders   *renderCache
	verifier  *verify.Verifier
	// versions remembers the versions pulled images declare, for the status.
	versions *imageVersions
	kind     string
	// deps checks spec.dependsOn.
	deps *dependencies
}

// steps returns the package steps for the lifecycle.
func (r *packageSteps[T]) steps() reconciler.Steps[T] {
	teardown := applier.TeardownInventory(r.applier, r.apiReader, r.options, r.kind, r.applyStatus, r.serviceAccount)
	return reconciler.Steps[T]{
		Status:    func(obj T) reconciler.CommonStatus { return applier.ApplyCommon(r.applyStatus(obj)) },
		Suspended: r.suspended, Observed: func(obj T) bool { return applier.Settled(obj) }, Pass: r.pass, Intervals: r.intervals,
		Finalize: func(ctx context.Context, obj T) (ctrl.Result, error) {
			// The render cache drops the resource's render when no other resource uses it
			// (teardown works from the inventory, not from a render).
			r.renders.forget(renderUser(obj.GetNamespace(), obj.GetName()))
			// Dependents being deleted go first (spec.dependsOn).
			if res, wait, err := r.dependentsFirst(ctx, obj); wait || err != nil {
				return res, err
			}
			r.applier.Drift(r.kind).Forget(obj)
			return teardown(ctx, obj)
		},
	}
}

func (r *packageSteps[T]) applyStatus(obj T) *v1alpha1.ApplyStatus {
	return &obj.GetStatus().ApplyStatus
}
func (r *packageSteps[T]) serviceAccount(obj T) string { return obj.GetSpec().ServiceAccountName }
func (r *packageSteps[T]) suspended(obj T) bool        { return obj.GetSpec().Suspend }

func (r *packageSteps[T]) pass(ctx context.Context, obj T, rep *reconciler.Report, lastHandled string) (ctrl.Result, error) {
	spec := obj.GetSpec()
	maxAge := resolveMaxAge(obj, lastHandled, spec.GetInterval(), time.Now())
	// The deferred status patch runs after cancel, so it keeps the parent context.
	rctx, cancel := context.WithTimeout(ctx, spec.GetTimeout())
	defer cancel()
	res, err := r.reconcile(rctx, obj, maxAge, applier.RecordInventory(rep, r.applyStatus(obj)))
	return r.outcome(ctx, obj, res, err), nil
}

// reconcile resolves, pulls, renders and applies. It returns the apply result when it got that far.
func (r *packageSteps[T]) reconcile(ctx context.Context, obj T, maxAge time.Duration, record func(context.Context, apply.Inventory) error) (*apply.Result, error) {
	spec, status := obj.GetSpec(), obj.GetStatus()
	if !conditions.IsReady(obj) || conditions.GetReason(obj, meta.ReadyCondition) != v1alpha1.ReconciliationSucceededReason {
		conditions.MarkReconciling(obj, v1alpha1.ProgressingReason, "reconciling %s", spec.Image)
	}
	// spec.image is parsed once, here: the steps after take the reference, not the string.
	image, err := r.admit(ctx, obj)
	if err != nil {
		return nil, err
	}
	creds, err := r.pullCredentials(ctx, obj, image)
	if err != nil {
		return nil, err
	}
	hc, err := r.applier.FindHostedCluster(ctx, obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	// Its reads by digest go through its own HostedCluster's mirrors too, and no other's: src is
	// its view of the source client.
	src := r.source.WithCallerMirrors(mirrors.OfHostedCluster(hc.Cluster))
	ref, err := r.resolve(ctx, src, spec, image, creds, maxAge)
	if err != nil {
		return nil, err
	}
	digest := ref.Digest
	if status.LastAttemptedRevision != digest {
		status.LastAttemptedVersion = "" // the version of another digest
	}
	status.LastAttemptedRevision, status.LastAttemptedTag = digest, ref.Tag
	// Before anything of the digest is pulled or a cached render of it is used.
	if err := r.verify(ctx, src, obj, ref, creds); err != nil {
		return nil, err
	}
	config, err := r.config(ctx, obj)
	if err != nil {
		return nil, err
	}
	configDigest := config.Digest

	if hc.Ambiguous != nil {
		// Its templates cannot be told which HostedCluster they render for: rendered without
		// one, a management phase could be as wrong as one rendered with the other's labels.
		// The whole Package waits, not only its hosted-cluster phases.
		return nil, &reconciler.NotHostedError{Namespace: obj.GetNamespace(), Why: hc.Ambiguous.Error()}
	}
	rendered, err := r.render(ctx, src, obj, ref, creds, config, hc.Cluster)
	if err != nil {
		status.Warnings = nil // the last render's; the error says more
		return nil, constraintViolated(err)
	}
	reportWarnings(r.applier.Recorder, obj, rendered.Warnings)
	version := packageVersion(spec.Semver != "", ref, r.versions, status.LastAttemptedVersion)
	status.LastAttemptedVersion = version
	from := r.servedFrom(ctx, src, ref, creds)
	if err := r.checkUniqueInstallation(ctx, obj, image, rendered.Manifest); err != nil {
		return nil, constraintViolated(err)
	}
	res, err := r.applier.Apply(ctx, r.passRequest(obj, rendered, hc, record))
	config.RedactResult(res)
	applier.RecordPass(&status.ApplyStatus, res)
	r.applier.Drift(r.kind).Record(obj, &status.ApplyStatus, spec.GetDriftPolicy(), res)
	if err == nil && res.Complete() {
		if status.LastAppliedRevision != digest || status.LastAppliedConfigDigest != configDigest {
			status.History = applier.PushHistory(status.History, digest, configDigest)
		}
		status.LastAppliedRevision, status.LastAppliedTag, status.LastAppliedVersion = digest, ref.Tag, version
		status.LastAppliedConfigDigest = configDigest
		status.LastAppliedFrom = from
	}
	// The API server's message may quote a value of an object, which may be a Secret's.
	return res, config.Redact(err)
}

// admit checks what needs no registry: the dependencies are ready (a resource waiting for them
// costs nothing), the ignored fields are ones pkgsync can leave to others, and spec.image parses.
func (r *packageSteps[T]) admit(ctx context.Context, obj T) (source.Reference, error) {
	if err := r.deps.check(ctx, obj, r.kind); err != nil {
		return source.Reference{}, err
	}
	spec := obj.GetSpec()
	if err := v1alpha1.ValidateIgnoreFields("spec.ignoreFields", spec.IgnoreFields); err != nil {
		return source.Reference{}, &reconciler.StageError{Reason: v1alpha1.InvalidSpecReason, Err: err}
	}
	ref, err := source.ParseReference(spec.Image)
	if err != nil {
		return source.Reference{}, &reconciler.StageError{Reason: v1alpha1.PullFailedReason, Err: fmt.Errorf("spec.image: %w", err)}
	}
	return ref, nil
}

// passRequest is the apply pass of a rendered package for obj.
func (r *packageSteps[T]) passRequest(obj T, rendered *render.Result, hc applier.HostedBehind, record func(context.Context, apply.Inventory) error) applier.Request {
	spec := obj.GetSpec()
	return applier.Request{
		Owner:          applier.OwnerOf(obj, r.kind),
		UID:            obj.GetUID(),
		ServiceAccount: spec.ServiceAccountName,
		Phases:         rendered.Phases,
		Probes:         rendered.Manifest.Spec.AvailabilityProbes,
		Adopt:          spec.AdoptionPolicy,
		Prune:          spec.PruneEnabled(),
		Previous:       obj.GetStatus().Inventory,
		Hosted:         hc,
		Record:         record,
		DriftPolicy:    spec.GetDriftPolicy(),
		Interval:       spec.GetInterval(),
		// The package's own first, then the user's.
		IgnoreFields: append(slices.Clone(rendered.Manifest.Spec.IgnoreFields), spec.IgnoreFields...),
	}
}

// resolve pins ref to a digest: the tag of spec.image, or with spec.semver the highest tag of
// the repository the range accepts. Tag resolutions and listings younger than maxAge, made
// for any resource, are reused.
//
// A registry notification for the repository (Options.Wakes) narrows maxAge as a reconcile
// request does: to a resolution made after it.
func (r *packageSteps[T]) resolve(ctx context.Context, src *source.Client, spec *v1alpha1.PackageSpec, ref source.Reference, creds source.Credentials, maxAge time.Duration) (source.Reference, error) {
	byRange := spec.Semver != ""
	maxAge = r.options.Wakes.Bound(ref, byRange, maxAge, time.Now())
	if !byRange {
		digest, err := src.ResolveWithin(ctx, ref, creds, maxAge)
		if err != nil {
			return source.Reference{}, reconciler.PullFailed(err)
		}
		r.options.Wakes.Resolved(ref, false, digest, time.Now())
		return ref.WithDigest(digest), nil
	}
	rng, err := source.ParseVersionRange(spec.Semver)
	if err != nil {
		return source.Reference{}, &reconciler.StageError{Reason: v1alpha1.InvalidVersionRangeReason,
			Err: fmt.Errorf("spec.semver: %w (write a range such as \">=1.4.0 <2.0.0\", \"~1.4\" or \"^1\")", err)}
	}
	chosen, err := src.ResolveVersion(ctx, ref, rng, creds, maxAge)
	if errors.Is(err, source.ErrNoMatchingVersion) {
		return source.Reference{}, &reconciler.StageError{Reason: v1alpha1.NoMatchingVersionReason,
			Err: fmt.Errorf("spec.semver: %w; looked at again in %s", err, spec.GetInterval())}
	}
	if err != nil {
		return source.Reference{}, reconciler.PullFailed(err)
	}
	r.options.Wakes.Resolved(ref, true, chosen.Digest, time.Now())
	return chosen, nil
}

// render pulls (through the source cache) and renders, reusing a render of the same content
// (repository and digest), configuration and environment, made for this resource or for
// another one (the render cache decides from what the package's renders read).
//
// Errors have the values of Secrets that spec.configFrom read removed from their messages.
func (r *packageSteps[T]) render(ctx context.Context, src *source.Client, obj T, ref source.Reference, creds source.Credentials, config *applier.ConfigInput, hc *hosted.HostedCluster) (*render.Result, error) {
	opts := applier.RenderOptions(r.options, obj.GetName(), obj.GetNamespace(), obj.GetLabels(), obj.GetAnnotations(), obj.GetSpec(), ref.String(), config.Raw, hc)
	pulls := r.applier.Metrics.Pulls
	renderFn := func() (*render.Result, error) {
		start := time.Now()
		artifact, err := src.Pull(ctx, ref, creds)
		if err != nil {
			pulls.WithLabelValues("failed").Inc()
			return nil, reconciler.PullFailed(err)
		}
		r.applier.Metrics.PullDuration.WithLabelValues(ref.Registry).Observe(time.Since(start).Seconds())
		r.applier.Metrics.PullBytes.WithLabelValues(ref.Registry).Add(float64(artifact.Size()))
		pulls.WithLabelValues("rendered").Inc()
		r.versions.add(ref.Content(), artifact.Version())
		// Templates stop at this bound whatever spec.timeout says: one resource must not hold a
		// worker for as long as its author likes.
		renderCtx, cancel := context.WithTimeout(ctx, applier.MaxRenderTime)
		defer cancel()
		rendered, err := render.Render(renderCtx, artifact.FS, opts)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", ref, err)
		}
		return rendered, nil
	}
	rendered, shared, err := r.renders.render(ref.Content(), config.RenderKey, opts, renderFn)
	if err != nil {
		return nil, config.Redact(err)
	}
	if shared {
		// The render came from a package of the same repository that another resource's
		// credentials could read; check this one's can (free within source's access TTL), so that
		// revoked access ends here too. The proof is asked of the registry the package was
		// pulled from, which the render key names.
		if err := src.Authorize(ctx, ref, creds); err != nil {
			if !src.HasCallerMirrors() {
				return nil, reconciler.PullFailed(err)
			}
			// Its HostedCluster's own mirrors prove access only to what is read from them
			// (source.Client.WithCallerMirrors): it pulls and renders for itself.
			if rendered, err = renderFn(); err != nil {
				return nil, config.Redact(err)
			}
		} else {
			pulls.WithLabelValues("cached").Inc()
		}
	}
	// Per resource: a shared render may come from a resource of the other scope.
	if err := applier.CheckScopes(rendered.Manifest, obj.GetNamespace() != ""); err != nil {
		return nil, err
	}
	return rendered, nil
}

// verify checks the signature of ref (pinned to a digest) against every TrustPolicy that
// covers it and against spec.verify when set. Failures are VerificationFailed stage errors
// naming the policy or field, the Secret, its keys and what failed. Without spec.verify or a
// policy it refuses the resource when signatures are required.
func (r *packageSteps[T]) verify(ctx context.Context, src *source.Client, obj T, ref source.Reference, creds source.Credentials) error {
	return r.verifier.Check(ctx, src, obj.GetSpec().Verify, obj.GetNamespace(), "spec.verify", ref, creds)
}

// pullCredentials returns the registry credentials of the resource: spec.pullSecretRef's (nil
// means the client's defaults, anonymous), or its cloud provider's for the ServiceAccount it
// runs as (spec.serviceAccountName, else --default-service-account for a Package), the
// controller's own identity when there is none.
func (r *packageSteps[T]) pullCredentials(ctx context.Context, obj T, image source.Reference) (source.Credentials, error) {
	ns := obj.GetNamespace()
	sa := obj.GetSpec().ServiceAccountName
	if ns == "" {
		ns = r.options.Namespace
	} else if sa == "" {
		sa = r.options.DefaultServiceAccount
	}
	return verify.PullCredentials(ctx, r.apiReader, r.options.Cloud, ns, sa, obj.GetSpec(), image)
}

// outcome sets the Ready condition from the pass and decides when to come back. A resource
// waiting for its dependencies is Reconciling with reason DependencyNotReady and comes back at
// its interval: a dependency's change wakes it before (watchDependencies).
func (r *packageSteps[T]) outcome(ctx context.Context, obj T, res *apply.Result, err error) ctrl.Result {
	iv := r.intervals(obj)
	var dep *dependencyError
	if errors.As(err, &dep) && dep.reason == v1alpha1.DependencyNotReadyReason {
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for dependencies", "message", dep.msg)
		return reconciler.Settle(obj, reconciler.Outcome{State: reconciler.OutcomeProgressing, Reason: dep.reason, Message: dep.msg, Wake: reconciler.Jittered(iv.Interval)}, iv)
	}
	iv.Progress = r.applier.ProgressCheck(obj.GetUID(), res, r.options.ProgressInterval)
	return applier.Conclude(ctx, obj, res, err, iv, appliedMessage(obj.GetStatus()))
}

// intervals are the resource's intervals for the requeue rule (requeueFor).
func (r *packageSteps[T]) intervals(obj T) reconciler.Intervals {
	spec := obj.GetSpec()
	return reconciler.Intervals{Interval: spec.GetInterval(), Retry: r.retryInterval(spec), Progress: r.options.ProgressInterval}
}

func (r *packageSteps[T]) retryInterval(spec *v1alpha1.PackageSpec) time.Duration {
	if d := spec.GetRetryInterval(); d > 0 {
		return d
	}
	return r.options.RetryInterval
}

// resolveMaxAge says how old a tag resolution (made by any resource) may be for this reconcile.
// An interval reconcile takes one from the last half interval, so a fleet of resources naming
// one tag costs one HEAD request per interval. A reconcile request takes one made after the
// request (reconciler.RequestAge, the rule a fleet follows too), and a new resource one made after its
// creation: a whole wave of them then shares one answer that is still newer than what was
// asked for. A changed spec always asks the registry. Ages are measured from now.
func resolveMaxAge(obj packageObject, lastHandled string, interval time.Duration, now time.Time) time.Duration {
	status := obj.GetStatus()
	if age, pending := reconciler.RequestAge(obj, lastHandled, now); pending {
		return age
	}
	switch {
	case status.LastAttemptedRevision == "":
		// Creation timestamps have second precision: round the age down to stay on the safe side.
		// Never older than an interval reconcile would take: a resource that has not resolved
		// yet (no tag in its semver range, say) must still see new tags.
		return min(max(now.Sub(obj.GetCreationTimestamp().Time)-time.Second, 0), interval/2)
	case status.ObservedGeneration != obj.GetGeneration() && conditions.IsReady(obj):
		return 0
	}
	return interval / 2
}
