package render

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// BooleanError is a field that must be a string holding a boolean. Objects are decoded as
// kubectl and Package Operator decode them, with sigs.k8s.io/yaml (go.yaml.in/yaml/v2), which
// reads YAML 1.1: on, off, y, n, yes and no (any case) are booleans there, so `name: on` is
// true. The API server would refuse the object, or a namespace would be lost; pkgsync says why.
type BooleanError struct {
	// Value is the boolean the field holds.
	Value bool
	// Written is the scalar as the file spells it (on, y...), empty when not known.
	Written string
	// path is the field's path, for finding its line.
	path []string
}

func (e *BooleanError) Error() string {
	msg := fmt.Sprintf("is the boolean %t (YAML 1.1 reads on/off/y/n/yes/no as booleans): quote it", e.Value)
	if e.Written != "" {
		msg += fmt.Sprintf(", %q", e.Written)
	}
	return msg
}

// BooleanFields returns a *BooleanError, in an *Error naming the field, for the first field of
// obj that must be a string and holds a boolean: apiVersion, kind, metadata.name,
// metadata.namespace, and the values of metadata.labels and metadata.annotations.
func BooleanFields(obj map[string]any) error {
	check := func(v any, path ...string) error {
		if b, ok := v.(bool); ok {
			return &Error{Field: strings.Join(path, "."), Err: &BooleanError{Value: b, path: path}}
		}
		return nil
	}
	errs := []error{check(obj["apiVersion"], "apiVersion"), check(obj["kind"], "kind")}
	meta, _ := obj["metadata"].(map[string]any)
	errs = append(errs, check(meta["name"], "metadata", "name"), check(meta["namespace"], "metadata", "namespace"))
	for _, f := range []string{"labels", "annotations"} {
		m, _ := meta[f].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, check(m[k], "metadata", f, k))
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// locateBoolean sets the line (within body) and the spelling of the field a *BooleanError in
// err names, reading body as YAML 1.2 (kyaml), where the scalar is the string it was written.
func locateBoolean(body string, err error) {
	var perr *Error
	var berr *BooleanError
	if !errors.As(err, &perr) || !errors.As(err, &berr) {
		return
	}
	root, perr2 := kyaml.Parse(body)
	if perr2 != nil {
		return
	}
	node, lerr := root.Pipe(kyaml.Lookup(berr.path...))
	if lerr != nil || node == nil {
		return
	}
	perr.Line = node.YNode().Line
	berr.Written = node.YNode().Value
}
