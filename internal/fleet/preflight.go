package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/fleet/rollout"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// A preflight renders a revision for every member's environment before any member is moved to
// it: the member Package the fleet would write (config overrides merged, the template's labels
// and annotations), rendered with the options the Package reconciler takes from it
// (applier.RenderOptions) and the HostedCluster behind its namespace, then validated as the Package
// reconciler validates (the package's scopes). spec.rollout.preflight runs it in the
// reconciler; `pkgsync fleet plan` runs it through PreflightFleet and adds a server-side dry run.

// preflightOptions are the render options of the member m would get on revision src, with its
// spec.configFrom read and merged as the member's reconciler will (memberConfig), and the key
// its preflight result is kept under: the options without the revision time annotation, which
// changes with every move and which a template has no business reading, and with the
// configuration's render key (a keyed HMAC when a Secret contributed) in place of the
// configuration, so that no plain digest of a Secret's value is kept.
func (r *fleetSteps) preflightOptions(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, src fleetRevisionSource, m *rollout.Member, now time.Time) (render.Options, string, *applier.ConfigInput, error) {
	desired, err := desiredMember(fleet, src, m, now)
	if err != nil {
		return render.Options{}, "", nil, &reconciler.StageError{Reason: v1alpha1.InvalidConfigReason, Err: err}
	}
	withShardLabels(desired, fleet, r.options.ShardLabelKeys)
	config, err := r.memberConfig(ctx, desired)
	if err != nil {
		return render.Options{}, "", nil, err
	}
	ro := applier.RenderOptions(r.options, desired.Name, desired.Namespace, desired.Labels, desired.Annotations, &desired.Spec, src.image, config.Raw, m.Cluster)
	keyed := ro
	keyed.Config = nil
	keyed.Annotations = maps.Clone(ro.Annotations)
	delete(keyed.Annotations, v1alpha1.FleetRevisionTimeAnnotation)
	data, err := json.Marshal(keyed)
	if err != nil {
		return render.Options{}, "", nil, fmt.Errorf("fingerprint the render options of member %s: %w", m.Namespace, err)
	}
	h := sha256.New()
	h.Write(data)
	h.Write([]byte("\x00" + config.RenderKey))
	return ro, hex.EncodeToString(h.Sum(nil)), config, nil
}

// memberConfig reads the member's spec.configFrom and merges its spec.config over it (applier.ReadConfig),
// in the member's namespace and as the identity the member reads it with (Applier.ConfigReader):
// its ServiceAccount, so that a template naming a Secret its members may not read fails the
// preflight as it would fail the member. Without an applier (PreflightFleet) it reads through
// r.apiReader, as whoever that client is.
func (r *fleetSteps) memberConfig(ctx context.Context, member *v1alpha1.Package) (*applier.ConfigInput, error) {
	var reader applier.ConfigSourceReader = r.apiReader
	if len(member.Spec.ConfigFrom) > 0 && r.applier != nil {
		var err error
		if reader, err = r.applier.ConfigReader(applier.OwnerOf(member, v1alpha1.PackageKind), member.Spec.ServiceAccountName, r.apiReader); err != nil {
			return nil, err
		}
	}
	return applier.ReadConfig(ctx, reader, member.Namespace, &member.Spec)
}

// configReadFailed tells a failed read of a member's spec.configFrom (the API server did not
// answer), which is retried, from a verdict: a missing or unusable source carries its reason (a
// reconciler.StageError) and fails the member as it would fail the member Package, and a Forbidden read is
// the member's own (it reports Forbidden and is blocked).
func configReadFailed(err error) bool {
	var se *reconciler.StageError
	return !errors.As(err, &se) && !apierrors.IsForbidden(err)
}

// preflightVerdict is the result of one member's preflight: reason is "" when it passed.
type preflightVerdict struct {
	reason, message string
}

// preflightResults keeps, per fleet, the verdicts on its target revision by member
// environment (preflightOptions' key), so that a reconcile renders only for members whose
// environment changed (a label, an annotation, an override) or that joined. Each fleet keeps
// one revision, and of it only the keys its last preflight used: at most one verdict per member.
type preflightResults struct {
	mu      sync.Mutex
	byFleet map[string]preflightEntry
}

type preflightEntry struct {
	revision string
	verdicts map[string]preflightVerdict
}

func (c *preflightResults) get(fleet, revision string) map[string]preflightVerdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byFleet[fleet]; ok && e.revision == revision {
		return e.verdicts
	}
	return nil
}

func (c *preflightResults) put(fleet, revision string, verdicts map[string]preflightVerdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byFleet == nil {
		c.byFleet = map[string]preflightEntry{}
	}
	c.byFleet[fleet] = preflightEntry{revision: revision, verdicts: verdicts}
}

// forget drops a fleet's verdicts, when the fleet is gone.
func (c *preflightResults) forget(fleet string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byFleet, fleet)
}

// preflight checks the target revision for every member (spec.rollout.preflight) and returns
// the members it fails for. The package is pulled (through the source cache) only when a
// member has no verdict yet. A pull that fails, or a render cut short, is an error: retried,
// never a verdict.
func (r *fleetSteps) preflight(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, target *v1alpha1.FleetRevision, members []*rollout.Member, now time.Time) ([]v1alpha1.MemberStatus, error) {
	spec := &fleet.Spec
	src := fleetRevisionSource{name: target.Name, image: target.Image, template: &spec.Template, overrides: spec.ConfigOverrides}
	known := r.preflights.get(fleet.Name, target.Name)
	verdicts := make(map[string]preflightVerdict, len(members))
	var fsys fs.FS
	var failed []v1alpha1.MemberStatus
	for _, m := range members {
		ro, key, config, err := r.preflightOptions(ctx, fleet, src, m, now)
		var v preflightVerdict
		var seen bool
		switch {
		case err != nil && configReadFailed(err):
			return nil, fmt.Errorf("preflight of member %s: %w", m.Namespace, err)
		case err != nil && apierrors.IsForbidden(err):
			// The member's identity may not read its configuration: the member reports
			// Forbidden and is blocked; that is no verdict on the revision.
		case err != nil:
			v = preflightVerdict{reason: reconciler.ReasonFor(err), message: err.Error()}
		default:
			if v, seen = known[key]; !seen {
				if fsys == nil {
					if fsys, err = r.pullTarget(ctx, fleet, target); err != nil {
						return nil, err
					}
				}
				if _, err := applier.PreflightRender(ctx, fsys, ro); err != nil {
					if errors.Is(err, applier.ErrTransient) {
						return nil, err
					}
					// The message goes to the fleet's status: no value of a member's Secret.
					v = preflightVerdict{reason: reconciler.ReasonFor(err), message: config.Redact(err).Error()}
				}
			}
			verdicts[key] = v
		}
		if v.reason != "" {
			failed = append(failed, v1alpha1.MemberStatus{Namespace: m.Namespace, Partition: m.Partition, Reason: v.reason, Message: "preflight: " + v.message})
		}
	}
	r.preflights.put(fleet.Name, target.Name, verdicts)
	return failed, nil
}

// pullTarget pulls the target revision's package with the fleet's pull Secret, as its tag was
// resolved.
func (r *fleetSteps) pullTarget(ctx context.Context, fleet *v1alpha1.HostedClusterPackage, target *v1alpha1.FleetRevision) (fs.FS, error) {
	ref, err := source.ParseReference(target.Image)
	if err != nil {
		return nil, &reconciler.StageError{Reason: v1alpha1.PullFailedReason, Err: fmt.Errorf("status.target.image: %w", err)}
	}
	creds, err := r.pullCredentials(ctx, fleet, ref)
	if err != nil {
		return nil, err
	}
	artifact, err := r.source.Pull(ctx, ref, creds)
	if err != nil {
		return nil, reconciler.PullFailed(fmt.Errorf("preflight of %s: %w", target.Name, err))
	}
	return artifact.FS, nil
}

// preflightOutcome halts the rollout before the target moves: the members it fails for named,
// the message bounded as every condition message is.
func preflightOutcome(target string, failed []v1alpha1.MemberStatus) reconciler.Outcome {
	return reconciler.Outcome{State: reconciler.OutcomeStalled, Reason: v1alpha1.PreflightFailedReason, Message: fmt.Sprintf(
		"revision %s fails the preflight (spec.rollout.preflight) for %d member(s); no member is moved to it: %s",
		target, len(failed), describeMembers(failed))}
}

// PreflightMember is the preflight of one member for `pkgsync fleet plan`.
type PreflightMember struct {
	// Namespace is the member's hosted-control-plane namespace; Partition its partition.
	Namespace, Partition string
	// HostedCluster is the member's HostedCluster, namespace/name.
	HostedCluster string
	// Revision is the fleet revision the member is on now ("" when it has no member yet).
	Revision string
	// Result is the render, nil when the preflight failed.
	Result *render.Result
	// Warnings are those of the member's configuration (keys the package's schema does not
	// declare, dropped), also when the preflight failed: a dropped key is often why.
	Warnings []render.Warning
	// Reason and Message say why the preflight failed; Reason is "" when it passed.
	Reason, Message string
}

// Preflight is what PreflightFleet found: every member's preflight, the partitions in
// rollout order, and the clusters that get no member (collisions).
type Preflight struct {
	// Revision names the candidate as the fleet would (status.target.name).
	Revision   string
	Partitions []string
	Members    []PreflightMember
	Collisions []v1alpha1.MemberStatus
}

// PreflightFleet renders image (pinned to a digest, its package in fsys) for every member of
// fleet as the fleet's member Packages would render it, and validates each render. It reads
// the HostedClusters and member Packages through c and writes nothing. opts supplies the
// management cluster's environment (versions, proxy, image overrides) as the controller has it.
func PreflightFleet(ctx context.Context, c client.Client, opts reconciler.Options, fleet *v1alpha1.HostedClusterPackage, image source.Reference, fsys fs.FS, now time.Time) (*Preflight, error) {
	if image.Digest == "" {
		return nil, fmt.Errorf("preflight of %s: the image is not pinned to a digest", image)
	}
	r := &fleetSteps{client: c, apiReader: c, options: opts}
	owned, err := r.ownedMembers(ctx, fleet)
	if err != nil {
		return nil, err
	}
	members, collisions, err := r.members(ctx, fleet, owned)
	if err != nil {
		return nil, err
	}
	td, err := templateDigest(&fleet.Spec)
	if err != nil {
		return nil, err
	}
	out := &Preflight{Revision: revisionName(image.Digest, td), Partitions: memberPartitions(members, fleet.Spec.Rollout.Partitions), Collisions: collisions}
	src := fleetRevisionSource{name: out.Revision, image: image.String(), template: &fleet.Spec.Template, overrides: fleet.Spec.ConfigOverrides}
	for _, m := range members {
		pm := PreflightMember{Namespace: m.Namespace, Partition: m.Partition, Revision: m.Revision()}
		if m.Cluster != nil {
			pm.HostedCluster = m.Cluster.Namespace + "/" + m.Cluster.Name
		}
		ro, _, config, err := r.preflightOptions(ctx, fleet, src, m, now)
		if err == nil {
			pm.Result, err = applier.PreflightRender(ctx, fsys, ro)
			err = config.Redact(err)
			if pm.Result != nil {
				pm.Warnings = pm.Result.Warnings
			} else {
				pm.Warnings = render.ConfigWarnings(fsys, ro)
			}
		} else if configReadFailed(err) {
			return nil, fmt.Errorf("preflight of member %s: %w", m.Namespace, err)
		}
		if err != nil {
			if errors.Is(err, applier.ErrTransient) {
				return nil, err
			}
			pm.Reason, pm.Message = reconciler.ReasonFor(err), err.Error()
		}
		out.Members = append(out.Members, pm)
	}
	return out, nil
}
