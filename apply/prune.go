package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// prune deletes the previous objects that left the package, last phase first, and returns the
// ones that need no more tracking: deleted, already gone, or no longer carrying this owner's labels.
func (e *Engine) prune(ctx context.Context, p *pass) (map[key]bool, error) {
	done := map[key]bool{}
	var errs []error
	for i := len(p.req.Previous.Phases) - 1; i >= 0; i-- {
		ph := p.req.Previous.Phases[i]
		var stale []ObjectRef
		for _, ref := range ph.Objects {
			// Prune runs after every object was applied in this pass: applied is complete.
			if _, ok := p.applied[ref.key(ph.Class)]; !ok {
				stale = append(stale, ref)
			}
		}
		if len(stale) == 0 {
			continue
		}
		t, ok := p.req.Targets[ph.Class]
		if !ok || t.Client == nil {
			errs = append(errs, fmt.Errorf("prune phase %s: %w", ph.Name, &TargetUnavailableError{Class: ph.Class, Err: ErrNoTarget}))
			continue
		}
		for _, ref := range stale {
			deleted, gone, err := deleteOwned(ctx, t, ph.Class, p.req.Owner, ref)
			if err != nil {
				errs = append(errs, fmt.Errorf("prune: %w", err))
				continue
			}
			if deleted {
				p.res.addChange(ref, ActionPruned)
			}
			if deleted || gone {
				done[ref.key(ph.Class)] = true
			}
		}
	}
	return done, errors.Join(errs...)
}

// deleteOwned deletes the object when it still carries the owner's labels. gone is true when
// nothing is left to do: the object does not exist, or belongs to someone else now (left alone).
func deleteOwned(ctx context.Context, t Target, class string, owner Owner, ref ObjectRef) (deleted, gone bool, err error) {
	obj, gone, err := getMetadata(ctx, t, class, ref)
	if err != nil || gone {
		return false, gone, err
	}
	if !owner.owns(obj.GetLabels()) {
		return false, true, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return false, false, nil
	}
	err = t.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return false, true, nil
	}
	if err != nil {
		return false, false, unreachable(fmt.Errorf("delete %s: %w", ref, err), class, t)
	}
	return true, false, nil
}

// getMetadata reads only the metadata of an object; gone is true when it or its kind no longer exists.
func getMetadata(ctx context.Context, t Target, class string, ref ObjectRef) (*metav1.PartialObjectMetadata, bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.GroupVersionKind())
	err := t.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, true, nil
	case err != nil:
		return nil, false, unreachable(fmt.Errorf("get %s: %w", ref, err), class, t)
	}
	return obj, false, nil
}
