package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ObjectPreview is what a pass would make of one object: the object as the cluster holds it and
// as a server-side dry-run apply of the desired object with the engine's field manager returns
// it, so a caller can show the difference (pkgsync diff).
type ObjectPreview struct {
	Ref ObjectRef
	// Live is the object in the cluster, nil when it does not exist.
	Live *unstructured.Unstructured
	// Applied is the object after the apply: the dry run's answer, the live object when the
	// engine would write nothing, or the desired object when the server cannot check it yet (its
	// namespace or its kind's CRD is created earlier in the same pass). Nil with Err.
	Applied *unstructured.Unstructured
	// Unchecked says Applied is the desired object as rendered, not the server's answer.
	Unchecked string
	// Err is why the object would not be applied (a collision, an immutable field).
	Err error
}

// PhasePreview is the preview of one phase.
type PhasePreview struct {
	Name, Class string
	// Skipped is set when the request has no target for the phase's class.
	Skipped bool
	Objects []ObjectPreview
}

// Preview computes, phase by phase, what Apply would change, writing nothing: each object is
// read and, when the engine would write it, applied as a server-side dry run with the same
// labels, desired-state hash, field manager and conflict rules as Apply. Phases of a class
// without a target are returned Skipped. Objects dropped from the package (prune) are not
// previewed: the CLI keeps no inventory. An error is returned when a cluster cannot be read.
func (e *Engine) Preview(ctx context.Context, req Request) ([]PhasePreview, error) {
	req.DryRun = true
	var out []PhasePreview
	for _, ph := range req.Phases {
		pp := PhasePreview{Name: ph.Name, Class: ph.Class}
		target, ok := req.Targets[ph.Class]
		if !ok || target.Client == nil {
			pp.Skipped = true
			out = append(out, pp)
			continue
		}
		objs, _, err := prepare(ph.Objects, req.Owner)
		if err != nil {
			return out, fmt.Errorf("phase %s: %w", ph.Name, err)
		}
		pending := map[string]bool{} // namespaces and kinds created earlier in this phase
		for _, obj := range objs {
			p, err := e.previewObject(ctx, req, ph.Class, target, obj, pending)
			if err != nil {
				return out, fmt.Errorf("phase %s: %w", ph.Name, err)
			}
			pp.Objects = append(pp.Objects, p)
		}
		out = append(out, pp)
	}
	return out, nil
}

// targetName names t for errors.
func targetName(t Target) string {
	if t.Name != "" {
		return t.Name
	}
	return "cluster"
}

func (e *Engine) previewObject(ctx context.Context, req Request, class string, t Target, obj *unstructured.Unstructured, pending map[string]bool) (ObjectPreview, error) {
	if err := resolveNamespace(req, t, obj); err != nil {
		switch {
		case meta.IsNoMatchError(err) && pending["kind:"+obj.GroupVersionKind().GroupKind().String()]:
			return ObjectPreview{Ref: RefOf(obj), Applied: obj, Unchecked: "its CRD is created first"}, nil
		case meta.IsNoMatchError(err), errors.Is(err, errNoNamespace):
			return ObjectPreview{Ref: RefOf(obj), Err: err}, nil
		}
		// Discovery failed: the cluster cannot be read, for this object and every other, so
		// the preview ends with one error rather than the same one per object.
		return ObjectPreview{}, fmt.Errorf("read the API resources of the %s: %w", targetName(t), err)
	}
	p := ObjectPreview{Ref: RefOf(obj)}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := t.Client.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil {
		p.Live = live
	} else if !apierrors.IsNotFound(err) {
		return p, fmt.Errorf("get %s on the %s: %w", p.Ref, t.Name, err)
	}
	if p.Live == nil {
		if gk, ok := crdKind(obj); ok {
			pending["kind:"+gk.String()] = true
		}
		if obj.GetKind() == "Namespace" && obj.GroupVersionKind().Group == "" {
			pending["ns:"+obj.GetName()] = true
		}
	}
	// No record of the Jobs that ran (the CLI keeps no inventory): a Job gone after it ran is
	// shown created, as the first pass of a new owner would create it.
	out, err := e.applyObject(ctx, req, class, t, obj, prior{})
	switch {
	case err != nil && p.Live == nil && pending["ns:"+obj.GetNamespace()] && apierrors.IsNotFound(err):
		p.Applied, p.Unchecked = obj, "its namespace is created first"
	case err != nil:
		var unavailable *TargetUnavailableError
		if errors.As(err, &unavailable) {
			return p, err
		}
		p.Err = err
	case out.live != nil:
		p.Applied = out.live
	default:
		// The engine would recreate it (an immutable field changed with the recreate annotation).
		p.Applied, p.Unchecked = obj, "it is deleted and created again"
	}
	return p, nil
}
