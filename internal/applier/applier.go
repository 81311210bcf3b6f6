package applier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
	"pkgsync.dev/pkgsync/internal/hosted"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

const classHosted = v1alpha1.ClassHostedCluster

// Applier makes the apply passes and teardowns of every kind that applies objects.
type Applier struct {
	engine  *apply.Engine
	Targets *Targets
	// Reader reads HostedClusters (from the manager's cache).
	Reader  client.Reader
	Metrics *reconciler.Metrics
	// HostedClustersIndexed says reader indexes HostedClusters by control-plane namespace.
	HostedClustersIndexed bool
	// controllerNamespace holds the ServiceAccounts cluster-scoped resources impersonate.
	controllerNamespace string
	// allowCrossNamespace lets namespaced resources place objects outside their namespace on
	// the management cluster.
	allowCrossNamespace bool
	// apiReader reads namespaces without caching them all.
	APIReader client.Reader
	// hostedNamespaceRule decides which namespaces may have hosted-cluster phases.
	hostedNamespaceRule reconciler.HostedNamespaceRule
	// defaultServiceAccount is impersonated by namespaced resources that name none.
	defaultServiceAccount string
	// Recorder reports objects let go during deletion.
	Recorder record.EventRecorder
	// progress is what the passes of each resource that has not converged learnt of its objects.
	progress progressByOwner
}

// Request is one pass for one resource.
type Request struct {
	Owner apply.Owner
	// UID is the owner's: its passes share what they learnt of its objects (apply.Progress).
	UID            types.UID
	ServiceAccount string
	Phases         []desired.Phase
	Probes         []v1alpha1.AvailabilityProbe
	Adopt          v1alpha1.AdoptionPolicy
	Prune          bool
	Previous       *v1alpha1.Inventory
	// Hosted is what is behind the owner's namespace, from findHostedCluster.
	Hosted HostedBehind
	// Record stores the intended inventory before the pass creates anything new.
	Record func(context.Context, apply.Inventory) error
	// DriftPolicy and ignoreFields: docs/drift.md.
	DriftPolicy  v1alpha1.DriftPolicy
	IgnoreFields []v1alpha1.IgnoreFields
	// Interval is the owner's reconcile interval: its passes read every object at least that
	// often, so an update trusts what the last complete pass found for that long
	// (apply.Request.Interval).
	Interval time.Duration
}

// Apply makes one pass and returns its result; the result is non-nil whenever the engine ran,
// even with an error, and its inventory is the one to store.
func (r *Applier) Apply(ctx context.Context, req Request) (*apply.Result, error) {
	classes := map[string]bool{}
	for _, ph := range req.Phases {
		classes[ph.Class] = true
	}
	previous, err := inventoryFromStatus(req.Previous)
	if err != nil {
		return nil, err
	}
	if classes[classHosted] && req.Owner.Namespace != "" {
		if err := r.admitHosted(ctx, req.Owner.Namespace, req.Hosted); err != nil {
			return nil, err
		}
	}

	if req.ServiceAccount != "" && req.Owner.Namespace == "" && r.controllerNamespace == "" {
		return nil, &reconciler.StageError{Reason: v1alpha1.ApplyFailedReason, Err: fmt.Errorf("spec.serviceAccountName %q: a cluster-scoped resource impersonates a ServiceAccount of the controller's namespace, and the controller was started without --namespace", req.ServiceAccount)}
	}
	tgts, hostedErr := r.Targets.forPass(ctx, req.Owner.Namespace, req.Hosted.Cluster, r.serviceAccountNamespace(req.Owner), r.serviceAccountFor(req.Owner, req.ServiceAccount), classes)
	if hostedErr != nil && tgts == nil {
		return nil, hostedErr
	}
	// The pass holds the hosted client from here until it returns (hosted.Clients.Release): a
	// settled pass is next made an interval from now, any other within seconds.
	var nextPass time.Duration
	if hostedErr == nil && classes[classHosted] {
		held := tgts[classHosted]
		defer func() { r.Targets.hosted.Release(req.Owner.Namespace, held, nextPass) }()
	}
	if hostedErr == nil && classes[classHosted] {
		hostedErr = gateOnHostedCluster(req.Hosted.Cluster, req.Owner.Namespace, time.Now())
		if hostedErr != nil {
			delete(tgts, classHosted)
		}
	}

	areq := apply.Request{
		Owner:            req.Owner,
		Phases:           req.Phases,
		Probes:           req.Probes,
		Targets:          tgts,
		Previous:         previous,
		DefaultNamespace: req.Owner.Namespace,
		Adopt:            req.Adopt,
		DriftPolicy:      req.DriftPolicy,
		IgnoreFields:     req.IgnoreFields,
		Interval:         req.Interval,
	}
	if req.Owner.Namespace != "" && !r.allowCrossNamespace {
		areq.Confine = map[string]string{"": req.Owner.Namespace}
	}
	// Without prune, objects that leave the package are let go: no longer tracked.
	areq.NoPrune = !req.Prune
	areq.Record = req.Record
	if req.UID != "" {
		cluster := ""
		if req.Hosted.Cluster != nil {
			cluster = req.Hosted.Cluster.Namespace + "/" + req.Hosted.Cluster.Name
		}
		areq.Progress = r.progress.get(req.UID, cluster)
	}
	res, err := r.engine.Apply(ctx, areq)
	if res != nil && err == nil && res.Complete() {
		r.progress.converged(req.UID)
		nextPass = req.Interval
	}
	r.Metrics.ObservePass(req.Owner.Kind, res)
	return res, r.passError(ctx, req.Owner.Namespace, err, hostedErr)
}

// passError says what an engine error means for the resource: how to leave its namespace, or
// why its hosted cluster is unavailable (hostedErr, when the pass had no hosted target), opening
// the cluster's circuit when the engine found it unreachable.
func (r *Applier) passError(ctx context.Context, namespace string, err, hostedErr error) error {
	var confined *apply.ConfinementError
	if errors.As(err, &confined) {
		return fmt.Errorf("%w; a namespaced resource may only create objects in its own namespace on the management cluster: use a ClusterPackage, or start the controller with --allow-cross-namespace", err)
	}
	var unavailable *apply.TargetUnavailableError
	if errors.As(err, &unavailable) && unavailable.Class == classHosted {
		if hostedErr != nil {
			return hostedErr // the engine only knows the target is missing; say why
		}
		return r.openCircuit(ctx, namespace, err, unavailable)
	}
	return err
}

// Drift reports what passes of a kind found drifted.
func (r *Applier) Drift(kind string) driftReport {
	return driftReport{recorder: r.Recorder, metrics: r.Metrics, kind: kind}
}

// serviceAccountFor returns the ServiceAccount a resource impersonates on the management
// cluster: its own, or the default one for namespaced resources.
func (r *Applier) serviceAccountFor(owner apply.Owner, serviceAccount string) string {
	if serviceAccount == "" && owner.Namespace != "" {
		return r.defaultServiceAccount
	}
	return serviceAccount
}

// serviceAccountNamespace is where spec.serviceAccountName is looked up: the resource's own
// namespace, or the controller's for cluster-scoped resources.
func (r *Applier) serviceAccountNamespace(owner apply.Owner) string {
	if owner.Namespace != "" {
		return owner.Namespace
	}
	return r.controllerNamespace
}

// OwnerOf names the resource in ownership labels.
func OwnerOf(obj client.Object, kind string) apply.Owner {
	return apply.Owner{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// New makes what applies a pass for every kind that applies objects.
func New(mgr ctrl.Manager, opts reconciler.Options, hc *hosted.Clients, m *reconciler.Metrics, recorder record.EventRecorder) *Applier {
	return &Applier{
		engine:                apply.NewEngine(apply.Options{Concurrency: opts.ApplyConcurrency, MaxInFlight: opts.MaxConcurrentApplies}),
		Targets:               newTargets(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper(), hc),
		Reader:                mgr.GetClient(),
		Metrics:               m,
		controllerNamespace:   opts.Namespace,
		allowCrossNamespace:   opts.AllowCrossNamespace,
		APIReader:             mgr.GetAPIReader(),
		hostedNamespaceRule:   opts.HostedNamespaceRule,
		defaultServiceAccount: opts.DefaultServiceAccount,
		Recorder:              recorder,
		progress:              newProgressByOwner(clock.RealClock{}),
	}
}
