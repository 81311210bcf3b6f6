package objectdeployment

import (
	"context"
	"fmt"
	"strconv"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
	"pkgsync.dev/pkgsync/internal/applier"
	"pkgsync.dev/pkgsync/internal/reconciler"
)

// objectDeploymentObject is what ObjectDeployment and ClusterObjectDeployment have in common.
type objectDeploymentObject interface {
	client.Object
	conditions.Setter
	GetSpec() *v1alpha1.ObjectDeploymentSpec
	GetStatus() *v1alpha1.ObjectDeploymentStatus
}

// objectDeploymentSteps are the steps of ObjectDeployments and ClusterObjectDeployments within
// the shared lifecycle: apply the inline phases with the same engine as packages.
type objectDeploymentSteps[T objectDeploymentObject] struct {
	// apiReader reads namespaces at teardown without caching them.
	apiReader client.Reader
	options   reconciler.Options
	applier   *applier.Applier
	kind      string
}

// steps returns the ObjectDeployment steps for the lifecycle.
func (r *objectDeploymentSteps[T]) steps() reconciler.Steps[T] {
	return reconciler.Steps[T]{
		Status:    func(obj T) reconciler.CommonStatus { return applier.ApplyCommon(r.applyStatus(obj)) },
		Suspended: r.suspended, Observed: func(obj T) bool { return applier.Settled(obj) }, Pass: r.pass, Intervals: r.intervals,
		Finalize: applier.TeardownInventory(r.applier, r.apiReader, r.options, r.kind, r.applyStatus, r.serviceAccount),
	}
}

func (r *objectDeploymentSteps[T]) applyStatus(obj T) *v1alpha1.ApplyStatus {
	return &obj.GetStatus().ApplyStatus
}
func (r *objectDeploymentSteps[T]) serviceAccount(T) string { return "" }
func (r *objectDeploymentSteps[T]) suspended(obj T) bool    { return obj.GetSpec().Suspend }

// intervals are the resource's intervals for the requeue rule (requeueFor): ObjectDeployments
// have no retryInterval of their own.
func (r *objectDeploymentSteps[T]) intervals(obj T) reconciler.Intervals {
	return reconciler.Intervals{Interval: obj.GetSpec().GetInterval(), Retry: r.options.RetryInterval, Progress: r.options.ProgressInterval}
}

func (r *objectDeploymentSteps[T]) pass(ctx context.Context, obj T, rep *reconciler.Report, _ string) (ctrl.Result, error) {
	spec := obj.GetSpec()
	status := &obj.GetStatus().ApplyStatus
	iv := r.intervals(obj)
	phases, err := phasesOf(spec.Template.Spec)
	if err != nil {
		return applier.Conclude(ctx, obj, nil, err, iv, ""), nil
	}
	hc, err := r.applier.FindHostedCluster(ctx, obj.GetNamespace())
	if err != nil {
		return applier.Conclude(ctx, obj, nil, err, iv, ""), nil
	}
	res, err := r.applier.Apply(ctx, applier.Request{
		Owner:    applier.OwnerOf(obj, r.kind),
		UID:      obj.GetUID(),
		Hosted:   hc,
		Phases:   phases,
		Probes:   spec.Template.Spec.AvailabilityProbes,
		Adopt:    spec.AdoptionPolicy,
		Prune:    true,
		Previous: status.Inventory,
		Record:   applier.RecordInventory(rep, status),
		Interval: spec.GetInterval(),
	})
	applier.RecordPass(status, res)
	if err == nil && res.Complete() {
		revision := strconv.FormatInt(obj.GetGeneration(), 10)
		if len(status.History) == 0 || status.History[0].Revision != revision {
			status.History = applier.PushHistory(status.History, revision, "")
		}
	}
	iv.Progress = r.applier.ProgressCheck(obj.GetUID(), res, r.options.ProgressInterval)
	return applier.Conclude(ctx, obj, res, err, iv, fmt.Sprintf("applied generation %d", obj.GetGeneration())), nil
}

// phasesOf decodes the inline objects into phases.
func phasesOf(spec v1alpha1.ObjectSetTemplateSpec) ([]desired.Phase, error) {
	phases := make([]desired.Phase, 0, len(spec.Phases))
	for _, ph := range spec.Phases {
		out := desired.Phase{Name: ph.Name, Class: ph.Class}
		for i, o := range ph.Objects {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(o.Object.Raw); err != nil {
				return nil, &reconciler.StageError{Reason: v1alpha1.RenderFailedReason, Err: fmt.Errorf("spec.template.spec.phases[%s].objects[%d]: %w", ph.Name, i, err)}
			}
			out.Objects = append(out.Objects, u)
		}
		phases = append(phases, out)
	}
	return phases, nil
}
