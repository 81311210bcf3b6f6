package schema

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// suggestField names the field that the schema of obj's kind declares beside the unknown one
// at path (a structured-merge-diff path) nearest to its name, "" when none is near enough.
func (c *Checker) suggestField(obj *unstructured.Unstructured, path string) string {
	// The schema comes with a typed value, which only a valid object gives: the kind alone is one.
	stub := &unstructured.Unstructured{Object: map[string]any{"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind()}}
	tv, err := c.typed.ObjectToTyped(stub)
	if err != nil {
		return ""
	}
	name, declared := fieldsBeside(tv.Schema(), tv.TypeRef(), path)
	return Nearest(name, declared)
}

// fieldsBeside follows path through the schema s from tr and returns the name of its last field
// and the names the mapping holding it declares.
func fieldsBeside(s *smdschema.Schema, tr smdschema.TypeRef, path string) (string, []string) {
	for path != "" {
		atom, ok := s.Resolve(tr)
		if !ok {
			return "", nil
		}
		if path[0] == '[' {
			end := closingBracket(path)
			if end < 0 || atom.List == nil {
				return "", nil
			}
			tr, path = atom.List.ElementType, path[end+1:]
			continue
		}
		m := atom.Map
		if path[0] != '.' || m == nil {
			return "", nil
		}
		name, rest := path[1:], ""
		if i := strings.IndexAny(name, ".["); i >= 0 {
			name, rest = name[:i], name[i:]
		}
		if rest == "" {
			declared := make([]string, 0, len(m.Fields))
			for _, f := range m.Fields {
				declared = append(declared, f.Name)
			}
			return name, declared
		}
		f, ok := m.FindField(name)
		if !ok {
			return "", nil
		}
		tr, path = f.Type, rest
	}
	return "", nil
}
