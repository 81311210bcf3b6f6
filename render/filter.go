package render

import (
	"context"
	"errors"
	"fmt"

	"github.com/bmatcuk/doublestar/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

const conditionAnnotation = v1alpha1.PackageOperatorConditionAnnotation

// filters are a manifest's CEL filters (spec.filter) and the condition annotation, prepared
// for one render.
type filters struct {
	cel *celEvaluator
	// evaluate is false when the render has no complete, valid configuration: expressions that
	// cannot be evaluated without it are then kept (true) rather than reported.
	evaluate bool
	// excludedGlobs are the globs of spec.filter.paths whose expression is false.
	excludedGlobs []string
}

// newFilters checks and evaluates spec.filter: the named conditions in order, then the path
// filters. Every problem is an *Error naming the manifest field and the expression.
func newFilters(ctx context.Context, file string, m *v1alpha1.PackageManifest, data map[string]any, evaluate bool) (*filters, Errors) {
	ev, err := newCELEvaluator(ctx, data)
	if err != nil {
		return nil, Errors{&Error{File: file, Field: "spec.filter", Err: err}}
	}
	f := &filters{cel: ev, evaluate: evaluate}
	var errs Errors
	bad := func(field string, err error) {
		errs = append(errs, &Error{File: file, Field: field, Err: err})
	}
	names := sets.New[string]()
	for i, c := range m.Spec.Filter.Conditions {
		field := fmt.Sprintf("spec.filter.conditions[%d]", i)
		switch {
		case c.Name == "":
			bad(field+".name", errors.New("required"))
		case !conditionNameRE.MatchString(c.Name):
			bad(field+".name", fmt.Errorf("%q is not a CEL identifier: use letters, digits and _, not starting with a digit", c.Name))
		case names.Has(c.Name):
			bad(field+".name", fmt.Errorf("duplicate condition %q", c.Name))
		}
		names.Insert(c.Name)
		if c.Expression == "" {
			bad(field+".expression", errors.New("required"))
			continue
		}
		v, err := f.check(c.Expression)
		if err != nil {
			bad(field+".expression", fmt.Errorf("condition %q: %w", c.Name, celError(c.Expression, err)))
			continue
		}
		ev.addCondition(c.Name, v)
	}
	for i, p := range m.Spec.Filter.Paths {
		field := fmt.Sprintf("spec.filter.paths[%d]", i)
		switch {
		case p.Glob == "":
			bad(field+".glob", errors.New("required"))
		case !doublestar.ValidatePattern(p.Glob):
			bad(field+".glob", fmt.Errorf("%q is not a valid glob", p.Glob))
		}
		if p.Expression == "" {
			bad(field+".expression", errors.New("required"))
			continue
		}
		keep, err := f.check(p.Expression)
		if err != nil {
			bad(field+".expression", fmt.Errorf("glob %q: %w", p.Glob, celError(p.Expression, err)))
			continue
		}
		if !keep {
			f.excludedGlobs = append(f.excludedGlobs, p.Glob)
		}
	}
	return f, errs
}

// check compiles and evaluates an expression. Without a complete configuration, an expression
// that cannot be evaluated (it reads a value the configuration lacks) counts as true: nothing
// is left out on a guess; compile errors are reported either way.
func (f *filters) check(expr string) (bool, error) {
	if !f.evaluate {
		if _, err := f.cel.compile(expr); err != nil {
			return false, err
		}
		v, err := f.cel.eval(expr)
		if err != nil {
			return true, nil //nolint:nilerr // unknown without the configuration: kept
		}
		return v, nil
	}
	return f.cel.eval(expr)
}

// excluded reports whether a package file is left out by spec.filter.paths. Globs match the
// path of the file as written and, for a template, the path it renders to.
func (f *filters) excluded(paths ...string) bool {
	for _, g := range f.excludedGlobs {
		for _, p := range paths {
			if doublestar.MatchUnvalidated(g, p) {
				return true
			}
		}
	}
	return false
}

// keep evaluates an object's condition annotation: an object without one is kept.
func (f *filters) keep(obj *unstructured.Unstructured) (bool, error) {
	expr, ok := obj.GetAnnotations()[conditionAnnotation]
	if !ok {
		return true, nil
	}
	if expr == "" {
		return false, errors.New("empty CEL expression: remove the annotation or give it an expression")
	}
	keep, err := f.check(expr)
	if err != nil {
		return false, celError(expr, err)
	}
	return keep, nil
}
