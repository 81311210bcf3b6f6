package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply"
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
	mapper  meta.RESTMapper
	metrics *metrics
	// hostedClustersIndexed says reader indexes HostedClusters by control-plane namespace.
	hostedClustersIndexed bool
	// controllerNamespace holds the ServiceAccounts cluster-scoped resources impersonate.
	controllerNamespace string
	// allowCrossNamespace lets namespaced resources place objects outside their namespace on
	// the management cluster.
	allowCrossNamespace bool
}

// rolloutRequest is one pass for one resource.
type rolloutRequest struct {
	owner          apply.Owner
	serviceAccount string
	phases         []render.Phase
	probes         []v1alpha1.AvailabilityProbe
	adopt          v1alpha1.AdoptionPolicy
	prune          bool
	previous       *v1alpha1.Inventory
	// hostedCluster behind the owner's namespace, from findHostedCluster; nil when none.
	hostedCluster *hosted.HostedCluster
}

// apply makes one pass and returns its result; the result is non-nil whenever the engine ran,
// even with an error, and its inventory is the one to store.
func (r *rollouts) apply(ctx context.Context, req rolloutRequest) (*apply.Result, error) {
	classes := map[string]bool{}
	for _, ph := range req.phases {
		classes[ph.Class] = true
	}
	if req.owner.Namespace != "" && !r.allowCrossNamespace {
		if err := r.checkScope(req.owner.Namespace, req.phases); err != nil {
			return nil, err
		}
	}
	previous, err := inventoryFromStatus(req.previous)
	if err != nil {
		return nil, err
	}

	if req.serviceAccount != "" && req.owner.Namespace == "" && r.controllerNamespace == "" {
		return nil, &stageError{reason: v1alpha1.ApplyFailedReason, err: fmt.Errorf("spec.serviceAccountName %q: a cluster-scoped resource impersonates a ServiceAccount of the controller's namespace, and the controller was started without --namespace", req.serviceAccount)}
	}
	tgts, hostedErr := r.targets.forRollout(ctx, req.owner.Namespace, r.serviceAccountNamespace(req.owner), req.serviceAccount, classes)
	if hostedErr != nil && tgts == nil {
		return nil, hostedErr
	}
	if hostedErr == nil && classes[classHosted] {
		hostedErr = gateOnHostedCluster(req.hostedCluster, req.owner.Namespace)
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
	}
	if req.adopt == v1alpha1.AdoptAlways {
		areq.Adopt = apply.AdoptAlways
	}
	if !req.prune {
		// Without prune, objects that leave the package are let go: no longer tracked.
		areq.Previous = apply.Inventory{}
	}
	res, err := r.engine.Apply(ctx, areq)
	r.metrics.recordPass(req.owner.Kind, res)
	var unavailable *apply.TargetUnavailableError
	if errors.As(err, &unavailable) && unavailable.Class == classHosted {
		if hostedErr != nil {
			// The engine only knows the target is missing; say why.
			err = hostedErr
		} else if r.targets.hosted != nil {
			r.targets.hosted.MarkUnavailable(req.owner.Namespace, unavailable.Err)
		}
	}
	return res, err
}

// gateOnHostedCluster holds hosted-cluster phases while the HostedCluster behind the namespace
// is not Available. Without a HostedCluster (or its API), the connector Secret alone decides.
func gateOnHostedCluster(hc *hosted.HostedCluster, namespace string) error {
	if hc == nil || hc.Available {
		return nil
	}
	msg := fmt.Sprintf("HostedCluster %s/%s is not Available: %s", hc.Namespace, hc.Name, hc.Message)
	if hc.Paused {
		msg += " (its reconciliation is paused)"
	}
	return &apply.TargetUnavailableError{Class: classHosted, Target: "hosted cluster " + namespace, Err: errors.New(msg)}
}

// checkScope refuses management-cluster objects outside the owner's namespace.
func (r *rollouts) checkScope(namespace string, phases []render.Phase) error {
	var outside []string
	for _, ph := range phases {
		if ph.Class != "" {
			continue
		}
		for _, obj := range ph.Objects {
			ns := obj.GetNamespace()
			if ns == "" {
				mapping, err := r.mapper.RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
				if err != nil || mapping.Scope.Name() == meta.RESTScopeNameNamespace {
					// Unknown kinds are namespaced until proven otherwise; the engine reports them.
					continue
				}
				outside = append(outside, fmt.Sprintf("%s %s (cluster-scoped)", obj.GetKind(), obj.GetName()))
				continue
			}
			if ns != namespace {
				outside = append(outside, fmt.Sprintf("%s %s/%s", obj.GetKind(), ns, obj.GetName()))
			}
		}
	}
	if len(outside) > 0 {
		return &scopeError{objects: outside}
	}
	return nil
}

// teardown makes one teardown pass. A hosted cluster that cannot be reached is skipped when
// skipUnreachableHosted is set (its namespace is going away, or the wait ran out), so that
// HyperShift's namespace deletion is never blocked.
func (r *rollouts) teardown(ctx context.Context, owner apply.Owner, serviceAccount string, inv *v1alpha1.Inventory, skipUnreachableHosted bool) (*apply.TeardownResult, error) {
	current, err := inventoryFromStatus(inv)
	if err != nil {
		return nil, err
	}
	classes := map[string]bool{}
	for _, ph := range current.Phases {
		classes[ph.Class] = true
	}
	tgts, hostedErr := r.targets.forRollout(ctx, owner.Namespace, r.serviceAccountNamespace(owner), serviceAccount, classes)
	if hostedErr != nil {
		if tgts == nil || !skipUnreachableHosted {
			return nil, hostedErr
		}
		current = withoutClass(current, classHosted)
	}
	res, err := r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: current, Targets: tgts})
	var unavailable *apply.TargetUnavailableError
	if err != nil && skipUnreachableHosted && errors.As(err, &unavailable) && unavailable.Class == classHosted {
		// The hosted API server went away during the pass: let its objects go.
		res, err = r.engine.Teardown(ctx, apply.TeardownRequest{Owner: owner, Inventory: withoutClass(current, classHosted), Targets: tgts})
	}
	return res, err
}

func withoutClass(inv apply.Inventory, class string) apply.Inventory {
	var out apply.Inventory
	for _, ph := range inv.Phases {
		if ph.Class != class {
			out.Phases = append(out.Phases, ph)
		}
	}
	return out
}

// findHostedCluster returns the HostedCluster behind a namespace, nil for cluster-scoped owners,
// namespaces without one, or clusters without HyperShift's API. Reconcilers call it once and
// hand the result to templates and to the hosted-phase gate.
func (r *rollouts) findHostedCluster(ctx context.Context, namespace string) (*hosted.HostedCluster, error) {
	if namespace == "" {
		return nil, nil
	}
	return hosted.FindHostedCluster(ctx, r.reader, namespace, r.hostedClustersIndexed)
}

// templateHostedCluster is what templates see of a HostedCluster as .environment.hyperShift.
func templateHostedCluster(hc *hosted.HostedCluster) *render.HostedCluster {
	if hc == nil {
		return nil
	}
	return &render.HostedCluster{Name: hc.Name, Namespace: hc.Namespace, HostedClusterNamespace: hc.ControlPlaneNamespace}
}

// serviceAccountNamespace is where spec.serviceAccountName is looked up: the resource's own
// namespace, or the controller's for cluster-scoped resources.
func (r *rollouts) serviceAccountNamespace(owner apply.Owner) string {
	if owner.Namespace != "" {
		return owner.Namespace
	}
	return r.controllerNamespace
}
