package controller

import (
	"context"
	"fmt"
	"strconv"

	"github.com/fluxcd/pkg/runtime/conditions"
	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
)

// objectDeploymentObject is what ObjectDeployment and ClusterObjectDeployment have in common.
type objectDeploymentObject interface {
	client.Object
	conditions.Setter
	GetSpec() *v1alpha1.ObjectDeploymentSpec
	GetStatus() *v1alpha1.ObjectDeploymentStatus
}

// ObjectDeploymentReconciler applies inline phases with the same engine as packages.
type ObjectDeploymentReconciler[T objectDeploymentObject] struct {
	client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Metrics   runtimectrl.Metrics
	Options   Options

	newObject func() T
	kind      string
	rollouts  *rollouts
}

// Reconcile implements reconcile.Reconciler.
func (r *ObjectDeploymentReconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := r.newObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	report := beginReport(r.Client, obj, &obj.GetStatus().RolloutStatus, r.Metrics, r.Recorder)
	defer func() { retErr = report.finish(ctx, retErr) }()

	owner := ownerOf(obj, r.kind)
	status := &obj.GetStatus().RolloutStatus
	if !obj.GetDeletionTimestamp().IsZero() {
		return finalize(ctx, r.rollouts, r.APIReader, obj, owner, "", status, r.Options)
	}
	if err := report.ensureFinalizer(ctx); err != nil {
		return ctrl.Result{}, err
	}
	spec := obj.GetSpec()
	r.Metrics.RecordSuspend(ctx, obj, spec.Suspend)
	acknowledgeRequest(obj, status)
	if spec.Suspend {
		return ctrl.Result{}, nil
	}

	phases, err := phasesOf(spec.Template.Spec)
	if err != nil {
		return conclude(ctx, obj, nil, err, spec.GetInterval(), r.Options.RetryInterval, r.Options.ProgressInterval, "")
	}
	hc, err := r.rollouts.findHostedCluster(ctx, obj.GetNamespace())
	if err != nil {
		return conclude(ctx, obj, nil, err, spec.GetInterval(), r.Options.RetryInterval, r.Options.ProgressInterval, "")
	}
	res, err := r.rollouts.apply(ctx, rolloutRequest{
		owner:         owner,
		hostedCluster: hc,
		phases:        phases,
		probes:        spec.Template.Spec.AvailabilityProbes,
		adopt:         spec.AdoptionPolicy,
		prune:         true,
		previous:      status.Inventory,
		record:        report.recordInventory(),
	})
	recordPass(status, res)
	if err == nil && res.Complete() {
		revision := strconv.FormatInt(obj.GetGeneration(), 10)
		if len(status.History) == 0 || status.History[0].Revision != revision {
			status.History = pushHistory(status.History, revision, "")
		}
	}
	return conclude(ctx, obj, res, err, spec.GetInterval(), r.Options.RetryInterval, r.Options.ProgressInterval,
		fmt.Sprintf("applied generation %d", obj.GetGeneration()))
}

// phasesOf decodes the inline objects into phases.
func phasesOf(spec v1alpha1.ObjectSetTemplateSpec) ([]desired.Phase, error) {
	phases := make([]desired.Phase, 0, len(spec.Phases))
	for _, ph := range spec.Phases {
		out := desired.Phase{Name: ph.Name, Class: ph.Class}
		for i, o := range ph.Objects {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(o.Object.Raw); err != nil {
				return nil, &stageError{reason: v1alpha1.RenderFailedReason, err: fmt.Errorf("spec.template.spec.phases[%s].objects[%d]: %w", ph.Name, i, err)}
			}
			out.Objects = append(out.Objects, u)
		}
		phases = append(phases, out)
	}
	return phases, nil
}
