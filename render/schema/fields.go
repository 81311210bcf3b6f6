package schema

import (
	"strconv"
	"strings"
)

// eachField calls fn with every value at path within v and the value's field path (prefix,
// then path with list indexes). path is dot-separated; a segment ending in "[]" is a list,
// each of whose items is visited. What is absent or of another shape is skipped: the typed
// check reports wrong shapes.
func eachField(v any, prefix, path string, fn func(field string, value any)) {
	if path == "" {
		fn(prefix, v)
		return
	}
	seg, rest, _ := strings.Cut(path, ".")
	name, isList := strings.CutSuffix(seg, "[]")
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	child, ok := m[name]
	if !ok {
		return
	}
	field := join(prefix, name)
	if !isList {
		eachField(child, field, rest, fn)
		return
	}
	items, _ := child.([]any)
	for i, item := range items {
		eachField(item, field+"["+strconv.Itoa(i)+"]", rest, fn)
	}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
