package reconciler

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statusPatcher writes what a reconcile changed of a resource: its metadata (the finalizer)
// and its status, each in one merge patch and only when it changed since the last write, the
// way Flux's SerialPatcher does, with one difference: Flux's helper sends the conditions in a
// request of their own (re-read and merged, so that conditions other controllers own survive),
// which makes every reconcile that changes both the conditions and the rest of the status (each
// one that applies something) write twice. pkgsync's resources have no condition another
// controller writes: every condition on them is the reconciler's own (Ready, Reconciling,
// Stalled) or mapped by it from the package's objects. So the status goes in one request,
// conditions included, and a reconcile that converges writes its outcome once.
type statusPatcher struct {
	client client.Client
	// before is the resource as last written (or read).
	before client.Object
}

func newStatusPatcher(obj client.Object, c client.Client) *statusPatcher {
	return &statusPatcher{client: c, before: obj.DeepCopyObject().(client.Object)}
}

// patch writes the changes of obj since the last patch: metadata and spec first (removing the
// last finalizer deletes the resource, whose status then needs no write), then the status.
func (p *statusPatcher) patch(ctx context.Context, obj client.Object) error {
	if c, ok := obj.(conditions.Setter); ok {
		boundConditionMessages(c)
	}
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.before)
	if err != nil {
		return err
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	beforeStatus, afterStatus := before["status"], after["status"]
	delete(before, "status")
	delete(after, "status")
	if err := p.send(ctx, obj, before, after, false); err != nil {
		return err
	}
	if err := p.send(ctx, obj, map[string]any{"status": beforeStatus}, map[string]any{"status": afterStatus}, true); err != nil {
		return err
	}
	p.before = obj.DeepCopyObject().(client.Object)
	return nil
}

// send patches the difference between before and after, to the status subresource or to the
// resource. The answer goes to a copy: obj keeps what the reconcile set of the other half.
func (p *statusPatcher) send(ctx context.Context, obj client.Object, before, after map[string]any, status bool) error {
	data, err := client.MergeFrom(&unstructured.Unstructured{Object: before}).Data(&unstructured.Unstructured{Object: after})
	if err != nil {
		return fmt.Errorf("compute patch: %w", err)
	}
	if string(data) == "{}" {
		return nil
	}
	target := obj.DeepCopyObject().(client.Object)
	patch := client.RawPatch(types.MergePatchType, data)
	if status {
		err = p.client.Status().Patch(ctx, target, patch, client.FieldOwner(FieldOwner))
	} else {
		err = p.client.Patch(ctx, target, patch, client.FieldOwner(FieldOwner))
	}
	return err
}
