package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// outcome is what applying one object did.
type outcome struct {
	action Action
	// live is the object as the API server holds it: from the GET when nothing was written,
	// from the apply response otherwise.
	live *unstructured.Unstructured
	// waiting explains why the object cannot be available in this pass (it is being deleted).
	waiting string
	// drift is set when the object drifted (corrected or left, Request.DriftPolicy).
	drift *Drift
	// job is set for a Job that ran in its desired state to an end and is gone, or being
	// deleted after it finished: it is available as it finished (job.go).
	job *v1alpha1.InventoryJob
}

// errNoNamespace says a namespaced object names no namespace and the request gives no default.
var errNoNamespace = errors.New("namespaced object has no namespace; set metadata.namespace in the package")

// resolveNamespace sets the namespace the API server will use: cleared for cluster-scoped
// kinds, the request's default for namespaced objects that name none.
func resolveNamespace(req Request, t Target, desired *unstructured.Unstructured) error {
	namespaced, err := t.Client.IsObjectNamespaced(desired)
	if err != nil {
		return err
	}
	if !namespaced {
		desired.SetNamespace("")
	} else if desired.GetNamespace() == "" {
		if req.DefaultNamespace == "" {
			return fmt.Errorf("%s: %w", RefOf(desired), errNoNamespace)
		}
		desired.SetNamespace(req.DefaultNamespace)
	}
	return nil
}

// prior is what earlier passes tell of an object before a pass sends anything for it.
type prior struct {
	// isNew says the owner's inventory does not hold it: it is expected not to exist.
	isNew bool
	// ran, for a Job, is the record of an earlier pass saying it ran in this desired state to
	// an end: gone, it is not created again (job.go).
	ran *v1alpha1.InventoryJob
	// version is the resourceVersion the last complete pass left it at, when its desired state
	// changed since (settled.go).
	version string
}

// applyObject brings one object to its desired state with at most one read and, only when the
// live object differs, one server-side apply. An object the owner's inventory does not hold
// (before.isNew) is expected not to exist: it is created without a read first (createNew), and
// read only when it turns out to exist. One whose resourceVersion the last complete pass
// settled (before.version) is written without a read first (updateKnown), and read only when
// it changed since.
func (e *Engine) applyObject(ctx context.Context, req Request, class string, t Target, desired *unstructured.Unstructured, before prior) (outcome, error) {
	if err := resolveKind(req, class, t, desired); err != nil {
		return outcome{}, err
	}
	ref := RefOf(desired)

	if out, done, err := e.writeUnread(ctx, req, class, t, desired, before); done {
		return out, err
	}
	ran := before.ran

	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	exists := true
	if err := t.Client.Get(ctx, client.ObjectKeyFromObject(desired), live); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return outcome{}, unreachable(fmt.Errorf("get %s: %w", ref, err), class, t)
	}

	force := false
	action := ActionCreated
	var drifted *Drift
	switch {
	case !exists && ran != nil:
		return outcome{action: ActionUnchanged, job: ran}, nil
	case exists && live.GetDeletionTimestamp() != nil:
		return beingDeleted(req, desired, live), nil
	}
	if exists {
		action = ActionConfigured
		// Ignored fields are sent on creation only: compared and applied without them. So are
		// the fields Kubernetes' own controllers own.
		ignored := append(ignoredPointers(req.IgnoreFields, desired), controllerOwnedPointers(desired)...)
		if len(ignored) > 0 {
			desired = withoutFields(desired, ignored)
		}
		owned := req.Owner.owns(live.GetLabels())
		switch {
		case !owned && req.Adopt != v1alpha1.AdoptAlways:
			return outcome{}, &CollisionError{Ref: ref, Target: t.Name, OwnedBy: ownerFromLabels(live.GetLabels())}
		case !owned:
			force = true // adoption is an explicit decision to take the object over
		case satisfied(desired, live):
			return outcome{action: ActionUnchanged, live: live}, nil
		default:
			drifted = drift(desired, live, req.DriftPolicy)
			if drifted != nil && !drifted.Corrected {
				return outcome{action: ActionUnchanged, live: live, drift: drifted}, nil
			}
		}
		if len(ignored) > 0 {
			if err := e.handOver(ctx, t.Client, live, ignored, req.DryRun); err != nil {
				return outcome{}, unreachable(fmt.Errorf("hand the ignored fields of %s over: %w", ref, err), class, t)
			}
		}
	}

	out, err := e.write(ctx, req, class, t, desired, live, exists, force)
	if err != nil || out.action != "" {
		return out, err
	}
	out.action, out.drift = action, drifted
	return out, nil
}

// beingDeleted is the outcome for an object being deleted: it is created again once gone, except
// a Job that ran in its desired state to an end. The TTL-after-finished controller deletes a
// finished Job in the foreground: it stays until the garbage collector has deleted its pods,
// finished, and there is nothing to wait for.
func beingDeleted(req Request, desired, live *unstructured.Unstructured) outcome {
	run, ok := jobRunOf(desired, live)
	switch {
	case !ok || !req.Owner.owns(live.GetLabels()) || !ranToEnd(run, desired):
		return outcome{live: live, waiting: "being deleted; it is created again once gone"}
	case run.Outcome == "":
		return outcome{live: live, waiting: "being deleted; it ran in this desired state and is not created again"}
	}
	return outcome{action: ActionUnchanged, live: live, job: &run}
}

// writeUnread writes an object without reading it first where an earlier pass says what it is
// (done): created when the inventory does not hold it (createNew), or updated over the
// resourceVersion the last complete pass settled (updateKnown). Not done when it turns out to
// exist, or to have changed since: the caller reads it and decides as for any object.
func (e *Engine) writeUnread(ctx context.Context, req Request, class string, t Target, desired *unstructured.Unstructured, before prior) (out outcome, done bool, err error) {
	if req.DryRun {
		return outcome{}, false, nil
	}
	ref := RefOf(desired)
	if before.isNew {
		created, err := e.createNew(ctx, t.Client, desired)
		switch {
		case err == nil:
			return outcome{action: ActionCreated, live: created}, true, nil
		case !exists(err):
			return outcome{}, true, unreachable(fmt.Errorf("apply %s: %w", ref, err), class, t)
		}
		return outcome{}, false, nil // it exists: collision, adoption, no-op are the caller's
	}
	if before.version == "" || len(ignoredPointers(req.IgnoreFields, desired))+len(controllerOwnedPointers(desired)) > 0 {
		return outcome{}, false, nil
	}
	updated, err := e.updateKnown(ctx, t.Client, desired, before.version)
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return outcome{action: ActionConfigured, live: updated}, true, nil
	case !errors.As(err, &status):
		return outcome{}, true, unreachable(fmt.Errorf("apply %s: %w", ref, err), class, t)
	}
	return outcome{}, false, nil // changed since, or refused: the caller reads it
}

// resolveKind maps the object's kind to its resource on the target and sets its namespace;
// a kind the target does not serve (yet) says which CRD to install, and resets the RESTMapper
// so that a CRD installed meanwhile is found on the next try.
func resolveKind(req Request, class string, t Target, desired *unstructured.Unstructured) error {
	err := resolveNamespace(req, t, desired)
	switch {
	case err == nil, errors.Is(err, errNoNamespace):
		return err
	case meta.IsNoMatchError(err):
		if r, ok := t.Client.RESTMapper().(meta.ResettableRESTMapper); ok {
			r.Reset()
		}
		return fmt.Errorf("%s: kind %s is not served by %s; install its CRD in this or an earlier phase: %w", RefOf(desired), desired.GroupVersionKind(), t.Name, err)
	}
	return unreachable(fmt.Errorf("%s: look up kind: %w", RefOf(desired), err), class, t)
}

// write server-side applies desired over live (absent when !exists): a conflict with a field
// manager that only took fields back from a drifted owned object is forced; an immutable field
// recreates the object when its RecreateAnnotation asks for it. The outcome holds the object
// the API server answered with, and an action only when write decided it (a recreation).
func (e *Engine) write(ctx context.Context, req Request, class string, t Target, desired, live *unstructured.Unstructured, exists, force bool) (outcome, error) {
	ref := RefOf(desired)
	applied, err := e.ssa(ctx, t.Client, desired, force, req.DryRun)
	if ce, ok := conflictFrom(err, ref, t.Name); ok {
		if !exists || !req.Owner.owns(live.GetLabels()) || !e.drifted(live, ce.Managers) {
			return outcome{}, ce
		}
		applied, err = e.ssa(ctx, t.Client, desired, true, req.DryRun)
	}
	if err != nil && isImmutable(err) {
		if !exists || desired.GetAnnotations()[RecreateAnnotation] != "true" {
			return outcome{}, &ImmutableFieldError{Ref: ref, Target: t.Name, Err: err}
		}
		if req.DryRun {
			return outcome{action: ActionConfigured}, nil
		}
		if err := t.Client.Delete(ctx, live, client.Preconditions{UID: ptr.To(live.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return outcome{}, unreachable(fmt.Errorf("delete %s to recreate it: %w", ref, err), class, t)
		}
		return outcome{action: ActionConfigured, live: live, waiting: "deleted to be recreated: an immutable field changed"}, nil
	}
	if err != nil {
		return outcome{}, unreachable(fmt.Errorf("apply %s: %w", ref, err), class, t)
	}
	return outcome{live: applied}, nil
}

// ssa sends a server-side apply and returns the object the API server answered with.
func (e *Engine) ssa(ctx context.Context, c client.Client, desired *unstructured.Unstructured, force, dryRun bool) (*unstructured.Unstructured, error) {
	// Apply decodes the response into the object it sends; send a copy to keep desired intact.
	obj := desired.DeepCopy()
	opts := []client.ApplyOption{client.FieldOwner(e.fieldManager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
		return nil, err
	}
	return obj, nil
}

// createNew creates an object with one server-side apply that fails, writing nothing, when the
// object exists. The request carries a resourceVersion no object ever has (etcd's revisions count
// up from 1): the API server ignores it when it creates the object, and answers 409 Conflict
// (stale resourceVersion, or a field another manager holds) when the object exists, before
// anything is written. A new object so costs one request, not a read (404) and an apply; an
// object that exists unknown to the inventory (another owner's, or one to adopt) is left
// untouched and goes through the read and the ownership checks (applyObject).
func (e *Engine) createNew(ctx context.Context, c client.Client, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj := desired.DeepCopy()
	obj.SetResourceVersion(neverResourceVersion)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(e.fieldManager)); err != nil {
		return nil, err
	}
	return obj, nil
}

// updateKnown writes a new desired state over an object exactly as the last complete pass left
// it, with one server-side apply carrying that pass's resourceVersion as a precondition: the API
// server answers 409 Conflict, writing nothing, when anyone (a controller, an edit, a deletion
// and a creation by someone else) changed the object since. pkgsync owned it then, and nothing
// changed: no read is needed to check ownership or drift.
func (e *Engine) updateKnown(ctx context.Context, c client.Client, desired *unstructured.Unstructured, resourceVersion string) (*unstructured.Unstructured, error) {
	obj := desired.DeepCopy()
	obj.SetResourceVersion(resourceVersion)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(e.fieldManager)); err != nil {
		return nil, err
	}
	return obj, nil
}

// neverResourceVersion is the largest resourceVersion the API server parses (uint64).
const neverResourceVersion = "18446744073709551615"

// exists reports whether createNew failed because the object exists.
func exists(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// drifted reports whether a conflict comes only from imperative edits (managers that wrote with
// update or patch, such as kubectl edit) of an object pkgsync applied before. Those edits took
// fields pkgsync had set: restoring them is drift correction, not stealing. A conflict with
// another applier (operation Apply) is a declared claim and is reported instead.
func (e *Engine) drifted(live *unstructured.Unstructured, managers []string) bool {
	appliedBefore := false
	ops := map[string][]metav1.ManagedFieldsOperationType{}
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == e.fieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
			appliedBefore = true
		}
		ops[mf.Manager] = append(ops[mf.Manager], mf.Operation)
	}
	if !appliedBefore {
		return false
	}
	for _, m := range managers {
		if m == e.fieldManager+HandoverSuffix {
			continue // pkgsync's own hand-over of ignored fields, taken back when a field is no longer ignored
		}
		if len(ops[m]) == 0 {
			return false
		}
		for _, op := range ops[m] {
			if op != metav1.ManagedFieldsOperationUpdate {
				return false
			}
		}
	}
	return true
}
