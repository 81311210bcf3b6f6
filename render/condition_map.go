package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/desired"
)

const conditionMapAnnotation = v1alpha1.PackageOperatorConditionMapAnnotation

// maxConditionMappings bounds the mappings of one object: each becomes a condition in the
// owner's status, which must stay small.
const maxConditionMappings = 64

// parseConditionMap reads Package Operator's condition-map annotation: one mapping per line,
// "SOURCE => DESTINATION", where SOURCE is a condition type of the object and DESTINATION the
// type it is reported under in the owner's status, which needs a domain prefix so that it never
// collides with the owner's own conditions (Ready, Reconciling, Stalled).
//
// Package Operator checks nothing else: a destination may be named by two lines, or by two
// objects of a package (its own multi-component test packages do), and the owner shows the
// condition written last. Two lines with the same source keep the last line's destination, as
// Package Operator's map from source to destination keeps it.
func parseConditionMap(value string) ([]desired.ConditionMapping, error) {
	lines := strings.Split(strings.TrimSpace(value), "\n")
	if len(lines) > maxConditionMappings {
		return nil, fmt.Errorf("%d lines, over %d mappings", len(lines), maxConditionMappings)
	}
	var out []desired.ConditionMapping
	for i, line := range lines {
		src, dst, ok := strings.Cut(line, "=>")
		src, dst = strings.TrimSpace(src), strings.TrimSpace(dst)
		var err error
		switch {
		case !ok:
			err = errors.New("want SOURCE => DESTINATION, for example Available => example.com/Available")
		case src == "":
			err = errors.New("the source condition type is empty")
		case dst == "":
			err = errors.New("the destination condition type is empty")
		case len(validation.IsQualifiedName(src)) > 0:
			err = fmt.Errorf("source %q is not a condition type: %s", src, strings.Join(validation.IsQualifiedName(src), "; "))
		default:
			err = checkDestination(dst)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = slices.DeleteFunc(out, func(m desired.ConditionMapping) bool { return m.Source == src })
		out = append(out, desired.ConditionMapping{Source: src, Destination: dst})
	}
	return out, nil
}

// checkDestination requires a qualified condition type with a domain prefix.
func checkDestination(dst string) error {
	prefix, name, ok := strings.Cut(dst, "/")
	if !ok || len(validation.IsDNS1123Subdomain(prefix)) > 0 {
		if !ok {
			name = dst
		}
		return fmt.Errorf("destination %q needs a domain prefix (example.com/%s)", dst, name)
	}
	if errs := validation.IsQualifiedName(dst); len(errs) > 0 {
		return fmt.Errorf("destination %q is not a condition type: %s", dst, strings.Join(errs, "; "))
	}
	return nil
}
