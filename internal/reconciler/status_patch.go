package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/fluxcd/pkg/runtime/conditions"
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
	// before is the resource as last written (or read), as the unstructured converter gives it:
	// kept in that form so that each patch converts only the resource as it is now.
	before map[string]any
}

func newStatusPatcher(obj client.Object, c client.Client) *statusPatcher {
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		before = nil // patch reports the error: the resource cannot be converted
	}
	return &statusPatcher{client: c, before: before}
}

// patch writes the changes of obj since the last patch: metadata and spec first (removing the
// last finalizer deletes the resource, whose status then needs no write), then the status.
func (p *statusPatcher) patch(ctx context.Context, obj client.Object) error {
	if c, ok := obj.(conditions.Setter); ok {
		boundConditionMessages(c)
	}
	if p.before == nil {
		before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		p.before = before
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	rest := mergePatch(withoutStatus(p.before), withoutStatus(after))
	if err := p.send(ctx, obj, rest, false); err != nil {
		return err
	}
	status := mergePatch(map[string]any{"status": p.before["status"]}, map[string]any{"status": after["status"]})
	if err := p.send(ctx, obj, status, true); err != nil {
		return err
	}
	p.before = after
	return nil
}

// withoutStatus is a shallow copy of an unstructured resource without its status.
func withoutStatus(u map[string]any) map[string]any {
	out := make(map[string]any, len(u))
	for k, v := range u {
		if k != "status" {
			out[k] = v
		}
	}
	return out
}

// send writes a merge patch to the status subresource or to the resource; an empty one is not
// sent. The answer goes to a copy: obj keeps what the reconcile set of the other half.
func (p *statusPatcher) send(ctx context.Context, obj client.Object, patch map[string]any, status bool) error {
	if len(patch) == 0 {
		return nil
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("compute patch: %w", err)
	}
	target := obj.DeepCopyObject().(client.Object)
	raw := client.RawPatch(types.MergePatchType, data)
	if status {
		return p.client.Status().Patch(ctx, target, raw, client.FieldOwner(FieldOwner))
	}
	return p.client.Patch(ctx, target, raw, client.FieldOwner(FieldOwner))
}

// mergePatch is the JSON merge patch (RFC 7386) that turns before into after, both as the
// unstructured converter gives them: the keys whose values differ, objects by their own patch,
// other values (lists included) whole, and null for a key after lacks. client.MergeFrom
// computes the same from the two marshalled documents (evanphx/json-patch's CreateMergePatch:
// two marshals and two parses of the whole resource per request); the patcher has both as maps
// already, and writes the status of every reconcile, so it diffs those.
func mergePatch(before, after map[string]any) map[string]any {
	patch := map[string]any{}
	for k, a := range after {
		b, ok := before[k]
		switch {
		case !ok:
			if a != nil {
				patch[k] = a
			}
		case reflect.DeepEqual(a, b):
		default:
			am, aIsMap := a.(map[string]any)
			bm, bIsMap := b.(map[string]any)
			if aIsMap && bIsMap {
				if sub := mergePatch(bm, am); len(sub) > 0 {
					patch[k] = sub
				}
				continue
			}
			patch[k] = a
		}
	}
	for k, b := range before {
		if _, ok := after[k]; !ok && b != nil {
			patch[k] = nil
		}
	}
	return patch
}
