package schema

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// maxTypedRounds bounds the conversions of one object. structured-merge-diff stops reading a
// mapping at the first unknown field it meets, in map order, so the fields after it would go
// unchecked and the report would vary from run to run: the check removes the unknown fields
// found (from a copy) and converts again, until none is left. Each round finds at least one; an
// object with unknown fields in more rounds than this has the last round's other problems
// reported as they are.
const maxTypedRounds = 16

const unknownFieldMessage = "field not declared in schema"

// checkTyped converts obj to a typed value with the built-in schema of its kind, as
// server-side apply does, and reports every field the schema does not declare, every value of
// the wrong type and every duplicate key of an associative list (which server-side apply
// refuses). Duplicates are not allowed: pkgsync applies with server-side apply. what names the
// schema in messages: "apps/v1 Deployment in Kubernetes 1.36".
func (c *Checker) checkTyped(obj *unstructured.Unstructured, what string) []Problem {
	var problems []Problem
	current := obj
	for round := 1; ; round++ {
		_, err := c.typed.ObjectToTyped(current)
		var errs typed.ValidationErrors
		if !errors.As(err, &errs) {
			// Nil, or a kind the models lack: nothing (more) the schema can say.
			break
		}
		var unknown []string
		var others []Problem
		for _, e := range errs {
			got, _ := valueAt(current.Object, e.Path)
			p := Problem{Field: strings.TrimPrefix(e.Path, "."), Detail: typedDetail(what, e.ErrorMessage, got)}
			if e.ErrorMessage == unknownFieldMessage {
				unknown = append(unknown, e.Path)
				if s := c.suggestField(obj, e.Path); s != "" {
					p.Detail = fmt.Sprintf("unknown field: %s has no such field; did you mean %s?", what, s)
				}
				problems = append(problems, p)
				continue
			}
			others = append(others, p)
		}
		if len(unknown) == 0 || round == maxTypedRounds || !removeFields(&current, obj, unknown) {
			problems = append(problems, others...)
			break
		}
	}
	return sortedProblems(problems)
}

// removeFields removes the fields at paths from *current, a copy of obj made the first time;
// it reports whether any was removed.
func removeFields(current **unstructured.Unstructured, obj *unstructured.Unstructured, paths []string) bool {
	if *current == obj {
		*current = obj.DeepCopy()
	}
	removed := false
	for _, p := range paths {
		if removeField((*current).Object, p) {
			removed = true
		}
	}
	return removed
}

var typeMismatchRE = regexp.MustCompile(`^expected (.+?), got `)

// typedDetail rewrites a structured-merge-diff message in the words of the rest of pkgsync's
// errors; got is the value at the field, when it was found.
func typedDetail(what, msg string, got any) string {
	if msg == unknownFieldMessage {
		return fmt.Sprintf("unknown field: %s has no such field (check its spelling and indentation)", what)
	}
	if strings.HasPrefix(msg, "duplicate entries for key") {
		return msg + ": each item of this list needs a key of its own (server-side apply refuses duplicates)"
	}
	m := typeMismatchRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want := typeName(m[1])
	detail := fmt.Sprintf("must be %s, not %s", want, describeValue(got))
	if want == "a string" {
		detail += " (quote it)"
	}
	return detail
}

// describeValue names a YAML value for a message: a scalar as written, a string quoted.
func describeValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("a string (%q)", v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// typeName names a structured-merge-diff type as a YAML author knows it.
func typeName(t string) string {
	switch t {
	case "numeric (int or float)", "float", "int":
		return "a number"
	case "string":
		return "a string"
	case "bool", "boolean":
		return "a boolean"
	case "map":
		return "a mapping"
	case "list":
		return "a list"
	}
	return t
}

// sortedProblems sorts problems by field, then detail: the validators walk maps, whose order
// varies from run to run.
func sortedProblems(problems []Problem) []Problem {
	slices.SortFunc(problems, func(a, b Problem) int { return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.Detail, b.Detail)) })
	return problems
}
