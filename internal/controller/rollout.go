package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/render"
)

const classHosted = v1alpha1.ClassHostedCluster

// rollouts runs apply passes and teardowns for every kind of resource.
type rollouts struct {
	engine  *apply.Engine
	targets *targets
	// reader reads HostedClusters (from the manager's cache).
	reader  client.Reader
	metrics *metrics
	// hostedClustersIndexed says reader indexes HostedClusters by control-plane namespace.
	hostedClustersIndexed bool
	// controllerNamespace holds the ServiceAccounts cluster-scoped resources impersonate.
	controllerNamespace string
	// allowCrossNamespace lets namespaced resources place objects outside their namespace on
	// the management cluster.
	allowCrossNamespace bool
	// apiReader reads namespaces without caching them all.
	apiReader client.Reader
	// hostedNamespaceRule decides which namespaces may have hosted-cluster phases.
	hostedNamespaceRule HostedNamespaceRule
	// defaultServiceAccount is impersonated by namespaced resources that name none.
	defaultServiceAccount string
	// recorder reports objects let go during deletion.
	recorder record.EventRecorder
}

// rolloutRequest is one pass for one resource.
type rolloutRequest struct {
	owner          apply.Owner
	serviceAccount string
	phases         []desired.Phase
	probes         []v1alpha1.AvailabilityProbe
	adopt          v1alpha1.AdoptionPolicy
	prune          bool
	previous       *v1alpha1.Inventory
	// hosted is what is behind the owner's namespace, from findHostedCluster.
	hosted hostedBehind
	// record stores the intended inventory before the pass creates anything new.
	record func(context.Context, apply.Inventory) error
}

// apply makes one pass and returns its result; the result is non-nil whenever the engine ran,
// even with an error, and its inventory is the one to store.
func (r *rollouts) apply(ctx context.Context, req rolloutRequest) (*apply.Result, error) {
	classes := map[string]bool{}
	for _, ph := range req.phases {
		classes[ph.Class] = true
	}
	previous, err := inventoryFromStatus(req.previous)
	if err != nil {
		return nil, err
	}
	if classes[classHosted] && req.owner.Namespace != "" {
		if err := r.admitHosted(ctx, req.owner.Namespace, req.hosted); err != nil {
			return nil, err
		}
	}

	if req.serviceAccount != "" && req.owner.Namespace == "" && r.controllerNamespace == "" {
		return nil, &stageError{reason: v1alpha1.ApplyFailedReason, err: fmt.Errorf("spec.serviceAccountName %q: a cluster-scoped resource impersonates a ServiceAccount of the controller's namespace, and the controller was started without --namespace", req.serviceAccount)}
	}
	tgts, hostedErr := r.targets.forRollout(ctx, req.owner.Namespace, req.hosted.cluster, r.serviceAccountNamespace(req.owner), r.serviceAccountFor(req.owner, req.serviceAccount), classes)
	if hostedErr != nil && tgts == nil {
		return nil, hostedErr
	}
	if hostedErr == nil && classes[classHosted] {
		hostedErr = gateOnHostedCluster(req.hosted.cluster, req.owner.Namespace, time.Now())
		if hostedErr != nil {
			delete(tgts, classHosted)
		}
	}

	areq := apply.Request{
		Owner:            req.owner,
		Phases:           req.phases,
		Probes:           req.probes,
		Targets:          tgts,
		Previous:         previous,
		DefaultNamespace: req.owner.Namespace,
		Adopt:            req.adopt,
	}
	if req.owner.Namespace != "" && !r.allowCrossNamespace {
		areq.Confine = map[string]string{"": req.owner.Namespace}
	}
	// Without prune, objects that leave the package are let go: no longer tracked.
	areq.NoPrune = !req.prune
	areq.Record = req.record
	res, err := r.engine.Apply(ctx, areq)
	r.metrics.recordPass(req.owner.Kind, res)
	var scope *apply.ScopeError
	if errors.As(err, &scope) {
		err = fmt.Errorf("%w; a namespaced resource may only create objects in its own namespace on the management cluster: use a ClusterPackage, or start the controller with --allow-cross-namespace", err)
	}
	var unavailable *apply.TargetUnavailableError
	if errors.As(err, &unavailable) && unavailable.Class == classHosted {
		if hostedErr != nil {
			// The engine only knows the target is missing; say why.
			err = hostedErr
		} else {
			err = r.openCircuit(ctx, req.owner.Namespace, err, unavailable)
		}
	}
	return res, err
}

// openCircuit records that the hosted API server of namespace did not answer during a pass
// (unavailable, found in err), so that the namespace's resources stop sending to it until a probe
// gets an answer, and returns the error to report: the circuit's, which reads the same on every
// retry until it closes. The reconcile's own deadline running out says the pass was long, not
// that the cluster is unreachable: err is returned as it is then.
func (r *rollouts) openCircuit(ctx context.Context, namespace string, err error, unavailable *apply.TargetUnavailableError) error {
	if r.targets.hosted == nil || namespace == "" || ctx.Err() != nil || errors.Is(unavailable.Err, apply.ErrNoTarget) {
		return err
	}
	var down *hosted.UnavailableError
	if errors.As(err, &down) {
		return err // the circuit was open already
	}
	if opened := r.targets.hosted.MarkUnavailable(namespace, unavailable.Err); opened != nil {
		return opened
	}
	return err
}

// gateOnHostedCluster holds hosted-cluster phases while the HostedCluster behind the namespace
// is not Available, or is paused (ReconciliationActive=False, or spec.pausedUntil "true" or a
// time still to come: HostedCluster.PausedAt). A paused hosted API server still answers, but its
// administrators asked HyperShift to leave the cluster alone and its credentials are no longer
// renewed: pkgsync does not roll out into it either. Teardown is not gated. Without a
// HostedCluster (admitted by the Label rule), the connector Secret alone decides.
func gateOnHostedCluster(hc *hosted.HostedCluster, namespace string, now time.Time) error {
	if hc == nil {
		return nil
	}
	var err error
	if paused, until := hc.PausedAt(now); paused {
		err = &pausedError{cluster: hc.Namespace + "/" + hc.Name, pausedUntil: hc.PausedUntil, until: until}
	} else if !hc.Available {
		err = fmt.Errorf("HostedCluster %s/%s is not Available: %s", hc.Namespace, hc.Name, hc.Message)
	} else {
		return nil
	}
	return &apply.TargetUnavailableError{Class: classHosted, Target: "hosted cluster " + namespace, Err: err}
}

// pausedError says a HostedCluster's owner paused it; until is when the pause ends by itself
// (spec.pausedUntil), zero when only resuming it ends it.
type pausedError struct {
	cluster, pausedUntil string
	until                time.Time
}

func (e *pausedError) Error() string {
	if b, err := strconv.ParseBool(e.pausedUntil); err == nil && b {
		return fmt.Sprintf("HostedCluster %s is paused (spec.pausedUntil: %q); hosted-cluster phases wait until it is resumed", e.cluster, e.pausedUntil)
	}
	if e.until.IsZero() {
		return fmt.Sprintf("HostedCluster %s is paused (ReconciliationActive=False); hosted-cluster phases wait until it is resumed", e.cluster)
	}
	return fmt.Sprintf("HostedCluster %s is paused until %s (spec.pausedUntil); hosted-cluster phases wait until then", e.cluster, e.until.UTC().Format(time.RFC3339))
}

// teardownPolicy says what a teardown pass may let go instead of deleting.
type teardownPolicy struct {
	// letGoUnreachableHosted lets hosted objects go when the hosted cluster cannot be reached:
	// its namespace is going away, or the wait ran out.
	letGoUnreachableHosted bool
	// namespaceTerminating lets management objects in the owner's terminating namespace go when
	// they cannot be deleted (the impersonated ServiceAccount's RoleBinding may be gone already):
	// the namespace deletion removes them anyway.
	namespaceTerminating bool
}

// teardown makes one teardown pass and returns, besides its result, the objects it let go
// instead of deleting, so that HyperShift's and Kubernetes' namespace deletion is never blocked.
// Hosted objects of a namespace that is not (or no longer) a hosted-control-plane namespace are
// always let go: the connector Secret of such a namespace is never used.
func (r *rollouts) teardown(ctx context.Context, owner apply.Owner, serviceAccount string, inv *v1alpha1.Inventory, policy teardownPolicy) (*apply.TeardownResult, []apply.ObjectRef, error) {
	current, err := inventoryFromStatus(inv)
	if err != nil {
		return nil, nil, err
	}
	isHosted := func(class string, _ apply.ObjectRef) bool { return class == classHosted }
	var letGo []apply.ObjectRef
	classes := map[string]bool{}
	for _, ph := range current.Phases {
		classes[ph.Class] = true
	}
	var behind hostedBehind
	if classes[classHosted] && owner.Namespace != "" {
		if behind, err = r.findHostedCluster(ctx, owner.Namespace); err != nil {
			return nil, nil, err
		}
		if r.admitHosted(ctx, owner.Namespace, behind) != nil {
			current, letGo = splitInventory(current, isHosted, letGo)
			delete(classes, classHosted)
		}
	}
	tgts, hostedErr := r.targets.forRollout(ctx, owner.Namespace, behind.cluster, r.serviceAccountNamespace(owner), r.serviceAccountFor(owner, serviceAccount), classes)
	if hostedErr != nil {
		if tgts == nil || !policy.letGoUnreachableHosted {
			return nil, letGo, hostedErr
		}
		current, letGo = splitInventory(current, isHosted, letGo)
	}
	res, err := r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
	var unavailable *apply.TargetUnavailableError
	if err != nil && hostedErr == nil && errors.As(err, &unavailable) && unavailable.Class == classHosted {
		// Teardown uses the circuit as apply passes do: the next passes, and the other resources
		// of the namespace, send nothing until a probe gets an answer.
		err = r.openCircuit(ctx, owner.Namespace, err, unavailable)
		if policy.letGoUnreachableHosted {
			// The hosted API server went away during the pass: let its objects go.
			current, letGo = splitInventory(current, isHosted, letGo)
			res, err = r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
		}
	}
	if err != nil && policy.namespaceTerminating && owner.Namespace != "" {
		inNamespace := func(class string, ref apply.ObjectRef) bool { return class == "" && ref.Namespace == owner.Namespace }
		current, letGo = splitInventory(current, inNamespace, letGo)
		res, err = r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
		if apierrors.IsForbidden(err) {
			// Objects outside the namespace (placed with --allow-cross-namespace) that the
			// resource's identity may no longer delete: the namespace must not wait for them.
			onManagement := func(class string, _ apply.ObjectRef) bool { return class == "" }
			current, letGo = splitInventory(current, onManagement, letGo)
			res, err = r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
		}
	}
	return res, letGo, err
}

// splitInventory removes the objects match selects from inv and appends them to out.
func splitInventory(inv apply.Inventory, match func(class string, ref apply.ObjectRef) bool, out []apply.ObjectRef) (apply.Inventory, []apply.ObjectRef) {
	var kept apply.Inventory
	for _, ph := range inv.Phases {
		keep := apply.InventoryPhase{Name: ph.Name, Class: ph.Class}
		for _, ref := range ph.Objects {
			if match(ph.Class, ref) {
				out = append(out, ref)
			} else {
				keep.Objects = append(keep.Objects, ref)
			}
		}
		if len(keep.Objects) > 0 {
			kept.Phases = append(kept.Phases, keep)
		}
	}
	return kept, out
}

// hostedBehind is what is behind a namespace: its HostedCluster (nil for cluster-scoped owners,
// namespaces without one, or clusters without HyperShift's API), or why none can be told.
type hostedBehind struct {
	cluster *hosted.HostedCluster
	// ambiguous says that several HostedClusters map to the namespace and HyperShift's
	// HostedControlPlane there names none of them: templates see no HostedCluster, and
	// hosted-cluster phases are refused (admitHosted).
	ambiguous *hosted.AmbiguousError
}

// findHostedCluster returns what is behind a namespace. Reconcilers call it once and hand the
// result to templates and to the hosted-phase gate. The HostedControlPlanes of a namespace are
// read, uncached, only where several HostedClusters map to it.
func (r *rollouts) findHostedCluster(ctx context.Context, namespace string) (hostedBehind, error) {
	if namespace == "" {
		return hostedBehind{}, nil
	}
	hc, err := hosted.FindHostedCluster(ctx, r.reader, r.apiReader, namespace, r.hostedClustersIndexed)
	var ambiguous *hosted.AmbiguousError
	if errors.As(err, &ambiguous) {
		return hostedBehind{ambiguous: ambiguous}, nil
	}
	return hostedBehind{cluster: hc}, err
}

// templateHostedCluster is what templates see of a HostedCluster as .environment.hyperShift.
func templateHostedCluster(hc *hosted.HostedCluster) *render.HostedCluster {
	if hc == nil {
		return nil
	}
	return &render.HostedCluster{Name: hc.Name, Namespace: hc.Namespace, HostedClusterNamespace: hc.ControlPlaneNamespace,
		Labels: hc.Labels, Annotations: hc.Annotations, NodeSelector: hc.NodeSelector, PlatformType: hc.PlatformType}
}

// serviceAccountFor returns the ServiceAccount a resource impersonates on the management
// cluster: its own, or the default one for namespaced resources.
func (r *rollouts) serviceAccountFor(owner apply.Owner, serviceAccount string) string {
	if serviceAccount == "" && owner.Namespace != "" {
		return r.defaultServiceAccount
	}
	return serviceAccount
}

// serviceAccountNamespace is where spec.serviceAccountName is looked up: the resource's own
// namespace, or the controller's for cluster-scoped resources.
func (r *rollouts) serviceAccountNamespace(owner apply.Owner) string {
	if owner.Namespace != "" {
		return owner.Namespace
	}
	return r.controllerNamespace
}
