package apply

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/apply/probing"
)

// Ignored fields (Request.IgnoreFields) are set when pkgsync creates an object and left to others
// afterwards. Leaving out a field pkgsync alone owns would make the API server delete it (or reset
// it to its default): a Deployment's replicas would drop to 1. So before the first apply that
// leaves such fields out, the engine hands them over: one apply, under the field manager
// HandoverFieldManager, of those fields alone at their live values. The API server then counts
// two owners, and pkgsync's apply without the fields releases only its own claim. This is the
// transfer Kubernetes documents for giving spec.replicas to an autoscaler
// (docs/reference/using-api/server-side-apply "Transferring ownership"). docs/apply-design.md.

// HandoverSuffix makes the field manager that keeps the ignored fields pkgsync handed over:
// FieldManager + HandoverSuffix ("pkgsync-ignored").
const HandoverSuffix = "-ignored"

// checkIgnoreFields refuses rules whose pointers do not parse. The caller validates them where it
// can name the field they came from; this is the engine's own guard.
func checkIgnoreFields(rules []v1alpha1.IgnoreFields) error {
	if err := v1alpha1.ValidateIgnoreFields("ignoreFields", rules); err != nil {
		return fmt.Errorf("ignored fields: %w", err)
	}
	return nil
}

// ignoredPointers returns the parsed pointers of the rules that select obj, whose namespace is
// resolved. Pointers that do not parse were refused before the pass.
func ignoredPointers(rules []v1alpha1.IgnoreFields, obj *unstructured.Unstructured) [][]string {
	var out [][]string
	gvk := obj.GroupVersionKind()
	for _, r := range rules {
		if r.Group != gvk.Group || r.Kind != gvk.Kind ||
			(r.Name != "" && r.Name != obj.GetName()) || (r.Namespace != "" && r.Namespace != obj.GetNamespace()) {
			continue
		}
		for _, p := range r.JSONPointers {
			if tokens, err := v1alpha1.ParseJSONPointer(p); err == nil {
				out = append(out, tokens)
			}
		}
	}
	return out
}

// controllerOwnedPointers are the fields of obj that Kubernetes' own controllers write, which a
// package sets on creation at most and then leaves to them, as if its author had listed them in
// ignoreFields: an author who writes the object as the Kubernetes docs do should not have to
// know the rule, and applying them again would fight the controller at every pass (Argo CD
// leaves them alone the same way).
//   - an aggregated ClusterRole's rules: the ClusterRole aggregation controller fills them from
//     the ClusterRoles its aggregationRule selects.
func controllerOwnedPointers(obj *unstructured.Unstructured) [][]string {
	gvk := obj.GroupVersionKind()
	if gvk.Group == "rbac.authorization.k8s.io" && gvk.Kind == "ClusterRole" {
		if rule, ok := obj.Object["aggregationRule"]; ok && rule != nil {
			return [][]string{{"rules"}}
		}
	}
	return nil
}

// withoutFields returns a copy of obj without the fields the pointers name. A pointer that names
// nothing in obj is skipped.
func withoutFields(obj *unstructured.Unstructured, pointers [][]string) *unstructured.Unstructured {
	c := obj.DeepCopy()
	for _, p := range pointers {
		c.Object, _ = removeAt(c.Object, p).(map[string]any)
	}
	return c
}

// removeAt returns v without the value at the pointer's tokens.
func removeAt(v any, tokens []string) any {
	if len(tokens) == 0 {
		return v
	}
	switch n := v.(type) {
	case map[string]any:
		child, ok := n[tokens[0]]
		if !ok {
			return v
		}
		if len(tokens) == 1 {
			delete(n, tokens[0])
			return n
		}
		n[tokens[0]] = removeAt(child, tokens[1:])
		return n
	case []any:
		i, err := strconv.Atoi(tokens[0])
		if err != nil || i < 0 || i >= len(n) {
			return v
		}
		if len(tokens) == 1 {
			return append(n[:i:i], n[i+1:]...)
		}
		n[i] = removeAt(n[i], tokens[1:])
		return n
	}
	return v
}

// handOver gives the fields under the pointers that pkgsync's own apply entry of live still
// claims to HandoverFieldManager, at their live values, so that the apply without them that
// follows keeps them. It writes nothing when pkgsync claims none of them (another manager took
// them, or they were handed over before). A conflict means another manager changed a field since
// live was read, which ends pkgsync's claim anyway: it is not an error, and nothing is forced.
func (e *Engine) handOver(ctx context.Context, c client.Client, live *unstructured.Unstructured, pointers [][]string, dryRun bool) error {
	partial, err := claimedUnder(live, e.fieldManager, pointers)
	if err != nil || partial == nil {
		return err
	}
	opts := []client.ApplyOption{client.FieldOwner(e.fieldManager + HandoverSuffix)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(partial), opts...)
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// claimedUnder returns the partial object that holds, at their live values, the fields under
// the pointers that manager's apply entry claims in live; nil when it claims none. Fields of
// positional (atomic) lists cannot be applied alone and are left out.
func claimedUnder(live *unstructured.Unstructured, manager string, pointers [][]string) (*unstructured.Unstructured, error) {
	var set *fieldpath.Set
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		set = &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			return nil, fmt.Errorf("read the managed fields of %s: %w", RefOf(live), err)
		}
	}
	if set == nil {
		return nil, nil
	}
	metadata := map[string]any{"name": live.GetName()}
	if live.GetNamespace() != "" {
		metadata["namespace"] = live.GetNamespace()
	}
	partial := map[string]any{"apiVersion": live.GetAPIVersion(), "kind": live.GetKind(), "metadata": metadata}
	found := false
	for p := range set.Leaves().All() {
		tokens, ok := pointerOf(live.Object, p)
		if !ok || !underAny(tokens, pointers) {
			continue
		}
		if grafted, ok := graft(partial, live.Object, p); ok {
			partial, found = grafted.(map[string]any), true
		}
	}
	if !found {
		return nil, nil
	}
	return &unstructured.Unstructured{Object: partial}, nil
}

// underAny reports whether the field at tokens is one of the pointers or inside one.
func underAny(tokens []string, pointers [][]string) bool {
outer:
	for _, p := range pointers {
		if len(p) > len(tokens) {
			continue
		}
		for i := range p {
			if p[i] != tokens[i] {
				continue outer
			}
		}
		return true
	}
	return false
}

// pointerOf turns a managed-fields path into the tokens of a JSON pointer into obj: list
// elements selected by key or value become their index. ok is false when obj has no such field.
func pointerOf(obj any, p fieldpath.Path) (tokens []string, ok bool) {
	cur := obj
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, isMap := cur.(map[string]any)
			if !isMap {
				return nil, false
			}
			if cur, ok = m[*pe.FieldName]; !ok {
				return nil, false
			}
			tokens = append(tokens, *pe.FieldName)
		default:
			l, isList := cur.([]any)
			if !isList {
				return nil, false
			}
			i := elementIndex(l, pe)
			if i < 0 {
				return nil, false
			}
			cur = l[i]
			tokens = append(tokens, strconv.Itoa(i))
		}
	}
	return tokens, true
}

// elementIndex finds the list element a path element selects; -1 when none.
func elementIndex(l []any, pe fieldpath.PathElement) int {
	switch {
	case pe.Index != nil:
		if *pe.Index >= 0 && *pe.Index < len(l) {
			return *pe.Index
		}
	case pe.Key != nil:
		for i, el := range l {
			if hasKey(el, *pe.Key) {
				return i
			}
		}
	case pe.Value != nil:
		want := (*pe.Value).Unstructured()
		for i, el := range l {
			if probing.Subset(want, el) {
				return i
			}
		}
	}
	return -1
}

// hasKey reports whether a list element holds every key field of an associative list's key.
func hasKey(el any, key value.FieldList) bool {
	m, ok := el.(map[string]any)
	if !ok {
		return false
	}
	for _, f := range key {
		v, ok := m[f.Name]
		if !ok || !probing.Subset(f.Value.Unstructured(), v) {
			return false
		}
	}
	return true
}

// graft copies the value at path p of src into dst, creating the maps and the list elements
// (with their key fields) along the way. ok is false when src has no such value or the path
// goes through a positional list, which an apply cannot address element by element.
func graft(dst, src any, p fieldpath.Path) (any, bool) {
	if len(p) == 0 {
		return runtime.DeepCopyJSONValue(src), true
	}
	pe := p[0]
	switch {
	case pe.FieldName != nil:
		sm, ok := src.(map[string]any)
		if !ok {
			return dst, false
		}
		sv, ok := sm[*pe.FieldName]
		if !ok {
			return dst, false
		}
		dm, _ := dst.(map[string]any)
		if dm == nil {
			dm = map[string]any{}
		}
		nv, ok := graft(dm[*pe.FieldName], sv, p[1:])
		if !ok {
			return dst, false
		}
		dm[*pe.FieldName] = nv
		return dm, true
	case pe.Key != nil:
		sl, ok := src.([]any)
		if !ok {
			return dst, false
		}
		i := elementIndex(sl, pe)
		if i < 0 {
			return dst, false
		}
		dl, _ := dst.([]any)
		j := elementIndex(dl, pe)
		el := map[string]any{}
		if j >= 0 {
			el = dl[j].(map[string]any)
		}
		for _, f := range *pe.Key {
			el[f.Name] = f.Value.Unstructured()
		}
		nv, ok := graft(el, sl[i], p[1:])
		if !ok {
			return dst, false
		}
		if j >= 0 {
			dl[j] = nv
		} else {
			dl = append(dl, nv)
		}
		return dl, true
	case pe.Value != nil && len(p) == 1:
		if _, ok := src.([]any); !ok {
			return dst, false
		}
		dl, _ := dst.([]any)
		return append(dl, runtime.DeepCopyJSONValue((*pe.Value).Unstructured())), true
	}
	return dst, false
}
