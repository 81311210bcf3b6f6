package controller

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

// applier makes the apply passes and teardowns of every kind that applies objects.
type applier struct {
	engine  *apply.Engine
	targets *targets
	// reader reads HostedClusters (from the manager's cache).
	reader  client.Reader
	metrics *reconciler.Metrics
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
	hostedNamespaceRule reconciler.HostedNamespaceRule
	// defaultServiceAccount is impersonated by namespaced resources that name none.
	defaultServiceAccount string
	// recorder reports objects let go during deletion.
	recorder record.EventRecorder
	// progress is what the passes of each resource that has not converged learnt of its objects.
	progress progressByOwner
}

// passRequest is one pass for one resource.
type passRequest struct {
	owner apply.Owner
	// uid is the owner's: its passes share what they learnt of its objects (apply.Progress).
	uid            types.UID
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
	// driftPolicy and ignoreFields: docs/drift.md.
	driftPolicy  v1alpha1.DriftPolicy
	ignoreFields []v1alpha1.IgnoreFields
}

// apply makes one pass and returns its result; the result is non-nil whenever the engine ran,
// even with an error, and its inventory is the one to store.
func (r *applier) apply(ctx context.Context, req passRequest) (*apply.Result, error) {
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
		return nil, &reconciler.StageError{Reason: v1alpha1.ApplyFailedReason, Err: fmt.Errorf("spec.serviceAccountName %q: a cluster-scoped resource impersonates a ServiceAccount of the controller's namespace, and the controller was started without --namespace", req.serviceAccount)}
	}
	tgts, hostedErr := r.targets.forPass(ctx, req.owner.Namespace, req.hosted.cluster, r.serviceAccountNamespace(req.owner), r.serviceAccountFor(req.owner, req.serviceAccount), classes)
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
		DriftPolicy:      req.driftPolicy,
		IgnoreFields:     req.ignoreFields,
	}
	if req.owner.Namespace != "" && !r.allowCrossNamespace {
		areq.Confine = map[string]string{"": req.owner.Namespace}
	}
	// Without prune, objects that leave the package are let go: no longer tracked.
	areq.NoPrune = !req.prune
	areq.Record = req.record
	if req.uid != "" {
		cluster := ""
		if req.hosted.cluster != nil {
			cluster = req.hosted.cluster.Namespace + "/" + req.hosted.cluster.Name
		}
		areq.Progress = r.progress.get(req.uid, cluster)
	}
	res, err := r.engine.Apply(ctx, areq)
	if res != nil && err == nil && res.Complete() {
		r.progress.done(req.uid)
	}
	r.metrics.RecordPass(req.owner.Kind, res)
	var confined *apply.ConfinementError
	if errors.As(err, &confined) {
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

// drift reports what passes of a kind found drifted.
func (r *applier) drift(kind string) driftReport {
	return driftReport{recorder: r.recorder, metrics: r.metrics, kind: kind}
}

// serviceAccountFor returns the ServiceAccount a resource impersonates on the management
// cluster: its own, or the default one for namespaced resources.
func (r *applier) serviceAccountFor(owner apply.Owner, serviceAccount string) string {
	if serviceAccount == "" && owner.Namespace != "" {
		return r.defaultServiceAccount
	}
	return serviceAccount
}

// serviceAccountNamespace is where spec.serviceAccountName is looked up: the resource's own
// namespace, or the controller's for cluster-scoped resources.
func (r *applier) serviceAccountNamespace(owner apply.Owner) string {
	if owner.Namespace != "" {
		return owner.Namespace
	}
	return r.controllerNamespace
}

// ownerOf names the resource in ownership labels.
func ownerOf(obj client.Object, kind string) apply.Owner {
	return apply.Owner{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// newApplier makes what applies a pass for every kind that applies objects.
func newApplier(mgr ctrl.Manager, opts reconciler.Options, hc *hosted.Clients, m *reconciler.Metrics, recorder record.EventRecorder) *applier {
	return &applier{
		engine:                apply.NewEngine(apply.Options{Concurrency: opts.ApplyConcurrency, MaxInFlight: opts.MaxConcurrentApplies}),
		targets:               newTargets(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper(), hc),
		reader:                mgr.GetClient(),
		metrics:               m,
		controllerNamespace:   opts.Namespace,
		allowCrossNamespace:   opts.AllowCrossNamespace,
		apiReader:             mgr.GetAPIReader(),
		hostedNamespaceRule:   opts.HostedNamespaceRule,
		defaultServiceAccount: opts.DefaultServiceAccount,
		recorder:              recorder,
		progress:              newProgressByOwner(clock.RealClock{}),
	}
}
