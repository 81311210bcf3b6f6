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

// checkTyped converts obj to a typed value with the built-in schema of its kind, as
// server-side apply does, and reports every field the schema does not declare, every value of
// the wrong type and every duplicate key of an associative list (which server-side apply
// refuses). Duplicates are not allowed: pkgsync applies with server-side apply.
// what names the schema in messages: "apps/v1 Deployment in Kubernetes 1.36".
func (c *Checker) checkTyped(obj *unstructured.Unstructured, what string) []Problem {
	_, err := c.typed.ObjectToTyped(obj)
	var errs typed.ValidationErrors
	if !errors.As(err, &errs) {
		// Nil, or a kind the models lack: nothing the schema can say.
		return nil
	}
	problems := make([]Problem, 0, len(errs))
	for _, e := range errs {
		problems = append(problems, Problem{Field: strings.TrimPrefix(e.Path, "."), Detail: typedDetail(what, e.ErrorMessage)})
	}
	return sortedProblems(problems)
}

var (
	typeMismatchRE = regexp.MustCompile(`^expected (.+?), got (.+)$`)
	typedValueRE   = regexp.MustCompile(`^&value\.valueUnstructured\{Value:(.*)\}$`)
)

// typedDetail rewrites a structured-merge-diff message in the words of the rest of pkgsync's
// errors.
func typedDetail(what, msg string) string {
	if msg == "field not declared in schema" {
		return fmt.Sprintf("unknown field: %s has no such field (check its spelling and indentation)", what)
	}
	if strings.HasPrefix(msg, "duplicate entries for key") {
		return msg + ": each item of this list needs a key of its own (server-side apply refuses duplicates)"
	}
	m := typeMismatchRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want, got := typeName(m[1]), m[2]
	if v := typedValueRE.FindStringSubmatch(got); v != nil {
		got = v[1]
	} else {
		got = typeName(got)
	}
	detail := fmt.Sprintf("must be %s, not %s", want, got)
	if want == "a string" {
		detail += " (quote it)"
	}
	return detail
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
