package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// prepare copies the rendered objects, adds the ownership labels and the desired-state hash, drops
// what apply must not send (status, server-set metadata), and orders CRDs first, then Namespaces, then the rest as rendered.
// origin maps each copy to the index of its object in objs.
func prepare(objs []*unstructured.Unstructured, owner Owner) (out []*unstructured.Unstructured, origin map[*unstructured.Unstructured]int, err error) {
	out = make([]*unstructured.Unstructured, 0, len(objs))
	origin = make(map[*unstructured.Unstructured]int, len(objs))
	for i, o := range objs {
		c, err := canonicalCopy(o)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", RefOf(o), err)
		}
		origin[c] = i
		delete(c.Object, "status")
		for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields"} {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
		labels := c.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range owner.labels() {
			labels[k] = v
		}
		c.SetLabels(labels)
		setDesiredHash(c)
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out, origin, nil
}

// rank orders the objects of a phase: CRDs, then Namespaces, then the rest.
func rank(o *unstructured.Unstructured) int {
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 0
	case schema.GroupKind{Kind: "Namespace"}:
		return 1
	}
	return 2
}

// canonicalCopy copies an object through JSON. Unlike DeepCopy it accepts any JSON-marshalable
// values (templating and kustomize may produce int or typed maps), and it leaves numbers as
// int64/float64, the types the comparison with live objects expects.
func canonicalCopy(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encode object: %w", err)
	}
	c := &unstructured.Unstructured{}
	if err := c.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	return c, nil
}

// desiredHashOf returns an object's DesiredHashAnnotation, "" when it has none. It reads the
// annotation in place: GetAnnotations copies every annotation into a new map, and each pass
// asks for each object's hash several times.
func desiredHashOf(obj *unstructured.Unstructured) string {
	hash, _, _ := unstructured.NestedString(obj.Object, "metadata", "annotations", DesiredHashAnnotation)
	return hash
}

// setDesiredHash stores a hash of the desired object in an annotation. The no-op check compares
// the desired object as a subset of the live one, which cannot see a field the package stopped
// setting; the hash changes with every change of the desired object, removals included, so such
// a revision is applied and server-side apply removes the field.
func setDesiredHash(obj *unstructured.Unstructured) {
	data, err := json.Marshal(obj.Object) // map keys are sorted: stable for equal objects
	if err != nil {
		return // unstructured content always marshals; without a hash only removals go unseen
	}
	sum := sha256.Sum256(data)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DesiredHashAnnotation] = hex.EncodeToString(sum[:16])
	obj.SetAnnotations(annotations)
}
