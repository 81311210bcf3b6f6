package schema

import (
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// removeField deletes the field at path, a structured-merge-diff path as its errors write one
// (.spec.template.spec.containers[name="web"].imagePullPolicy), from obj. It reports whether
// the field was there.
func removeField(obj map[string]any, path string) bool {
	m, name, ok := fieldAt(obj, path)
	if ok {
		delete(m, name)
	}
	return ok
}

// valueAt returns the value at path (as removeField reads it) in obj.
func valueAt(obj map[string]any, path string) (any, bool) {
	m, name, ok := fieldAt(obj, path)
	if !ok {
		return nil, false
	}
	return m[name], true
}

// fieldAt finds the field at path in obj: the mapping that holds it and its name.
func fieldAt(obj map[string]any, path string) (map[string]any, string, bool) {
	var cur any = obj
	for path != "" {
		switch path[0] {
		case '.':
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, "", false
			}
			name, rest := fieldName(m, path[1:])
			if _, ok := m[name]; !ok {
				return nil, "", false
			}
			if rest == "" {
				return m, name, true
			}
			cur, path = m[name], rest
		case '[':
			end := closingBracket(path)
			if end < 0 {
				return nil, "", false
			}
			items, _ := cur.([]any)
			item, ok := listItem(items, path[1:end])
			if !ok {
				return nil, "", false
			}
			cur, path = item, path[end+1:]
		default:
			return nil, "", false
		}
	}
	return nil, "", false
}

// fieldName splits the name of a field of m off the front of path (after its dot): the
// longest one m has, since a name may hold dots itself; the rest starts with "." or "[".
func fieldName(m map[string]any, path string) (string, string) {
	end := strings.IndexByte(path, '[')
	if end < 0 {
		end = len(path)
	}
	for cut := end; cut > 0; cut = strings.LastIndexByte(path[:cut], '.') {
		if _, ok := m[path[:cut]]; ok {
			return path[:cut], path[cut:]
		}
	}
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i], path[i:]
	}
	return path, ""
}

// closingBracket finds the "]" that closes the "[" path starts with, outside quoted strings.
func closingBracket(path string) int {
	quoted := false
	for i := 1; i < len(path); i++ {
		switch {
		case quoted && path[i] == '\\':
			i++
		case path[i] == '"':
			quoted = !quoted
		case !quoted && path[i] == ']':
			return i
		}
	}
	return -1
}

// listItem finds the item of items that sel (between brackets) names: an index, "=VALUE" (an
// item of a set), or "KEY=VALUE,..." (an item of a keyed list), values as structured-merge-diff
// writes them.
func listItem(items []any, sel string) (any, bool) {
	if i, err := strconv.Atoi(sel); err == nil {
		if i < 0 || i >= len(items) {
			return nil, false
		}
		return items[i], true
	}
	for _, item := range items {
		if v, ok := strings.CutPrefix(sel, "="); ok {
			if value.ToString(value.NewValueInterface(item)) == v {
				return item, true
			}
			continue
		}
		if m, ok := item.(map[string]any); ok && keysMatch(m, sel) {
			return item, true
		}
	}
	return nil, false
}

// keysMatch tells whether m has every KEY=VALUE of sel.
func keysMatch(m map[string]any, sel string) bool {
	pairs, ok := selectorPairs(sel)
	if !ok {
		return false
	}
	for _, p := range pairs {
		v, present := m[p.key]
		if !present || value.ToString(value.NewValueInterface(v)) != p.value {
			return false
		}
	}
	return true
}

// keyValue is one KEY=VALUE of a keyed list's item selector, VALUE as structured-merge-diff
// writes it (a string quoted).
type keyValue struct{ key, value string }

// selectorPairs splits sel, KEY=VALUE,KEY=VALUE...; ok is false when it is not written so.
func selectorPairs(sel string) (pairs []keyValue, ok bool) {
	for sel != "" {
		name, rest, ok := strings.Cut(sel, "=")
		if !ok {
			return nil, false
		}
		end := len(rest)
		if strings.HasPrefix(rest, `"`) {
			end = closingQuote(rest) + 1
		} else if i := strings.IndexByte(rest, ','); i >= 0 {
			end = i
		}
		if end <= 0 || end > len(rest) {
			return nil, false
		}
		pairs = append(pairs, keyValue{name, rest[:end]})
		sel = strings.TrimPrefix(rest[end:], ",")
	}
	return pairs, len(pairs) > 0
}

// closingQuote finds the quote that ends the quoted string s starts with, -1 if none.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}
