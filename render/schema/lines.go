package schema

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FieldLine returns the 1-based line, within doc, of the field a Problem's Field names, doc
// being the YAML document the object was decoded from, parsed as a node tree (yaml.v3 keeps
// every node's line; the decoded object does not). The path is walked as the checks write it:
// field names after dots (the longest name a mapping has, since a name may hold dots itself),
// list items by index, by key (KEY=VALUE,... as structured-merge-diff writes a keyed list's item)
// or by value (=VALUE, an item of a set), and mapping keys in brackets as apimachinery's
// field.Path writes them. The line is that of the field's key, or of the list item; when the
// field is not there (a required field that is missing), that of the nearest enclosing field that
// is. 0 when not even the path's first field is in doc.
func FieldLine(doc *yaml.Node, path string) int {
	if doc == nil || path == "" {
		return 0
	}
	node := doc
	if node.Kind == yaml.DocumentNode {
		if len(node.Content) == 0 {
			return 0
		}
		node = node.Content[0]
	}
	if path[0] != '.' && path[0] != '[' {
		path = "." + path
	}
	line := 0
	for path != "" {
		if node.Kind == yaml.AliasNode && node.Alias != nil {
			node = node.Alias
		}
		var next *yaml.Node
		var at int
		switch path[0] {
		case '.':
			if node.Kind != yaml.MappingNode {
				return line
			}
			key, value, rest, ok := mappingField(node, path[1:])
			if !ok {
				return line
			}
			next, at, path = value, key.Line, rest
		case '[':
			end := closingBracket(path)
			if end < 0 {
				return line
			}
			sel := path[1:end]
			switch node.Kind {
			case yaml.SequenceNode:
				item := sequenceItem(node, sel)
				if item == nil {
					return line
				}
				next, at = item, item.Line
			case yaml.MappingNode:
				key, value := mappingKey(node, sel)
				if key == nil {
					return line
				}
				next, at = value, key.Line
			default:
				return line
			}
			path = path[end+1:]
		default:
			return line
		}
		node, line = next, at
	}
	return line
}

// mappingField finds the field of a mapping node that path (after its dot) starts with: the
// longest name the mapping has, as fieldName reads a decoded mapping. It returns the key and
// value nodes and the rest of the path.
func mappingField(m *yaml.Node, path string) (key, value *yaml.Node, rest string, ok bool) {
	end := strings.IndexByte(path, '[')
	if end < 0 {
		end = len(path)
	}
	for cut := end; cut > 0; cut = strings.LastIndexByte(path[:cut], '.') {
		if key, value := mappingKey(m, path[:cut]); key != nil {
			return key, value, path[cut:], true
		}
	}
	return nil, nil, "", false
}

// mappingKey finds the key named name in a mapping node, and its value. When a key is repeated,
// the last one counts: it is the one decoding keeps.
func mappingKey(m *yaml.Node, name string) (key, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == name {
			key, value = k, m.Content[i+1]
		}
	}
	return key, value
}

// sequenceItem finds the item of a sequence node that sel (between brackets) names, as listItem
// does for decoded lists; nil when none.
func sequenceItem(s *yaml.Node, sel string) *yaml.Node {
	if i, err := strconv.Atoi(sel); err == nil {
		if i < 0 || i >= len(s.Content) {
			return nil
		}
		return s.Content[i]
	}
	if v, ok := strings.CutPrefix(sel, "="); ok {
		for _, item := range s.Content {
			if item.Kind == yaml.ScalarNode && scalarIs(item, v) {
				return item
			}
		}
		return nil
	}
	pairs, ok := selectorPairs(sel)
	if !ok {
		return nil
	}
	// An item whose keys are all there and match; else one whose keys that are there match: a
	// key the item lacks is one the schema defaults (a port's protocol="TCP"), which
	// structured-merge-diff writes into the path.
	var lenient *yaml.Node
	for _, item := range s.Content {
		if item.Kind != yaml.MappingNode {
			continue
		}
		present, match := 0, true
		for _, p := range pairs {
			_, v := mappingKey(item, p.key)
			if v == nil {
				continue
			}
			present++
			if v.Kind != yaml.ScalarNode || !scalarIs(v, p.value) {
				match = false
				break
			}
		}
		switch {
		case match && present == len(pairs):
			return item
		case match && present > 0 && lenient == nil:
			lenient = item
		}
	}
	return lenient
}

// scalarIs tells whether a scalar node holds the value structured-merge-diff writes as written:
// a string quoted, anything else as it is.
func scalarIs(n *yaml.Node, written string) bool {
	if strings.HasPrefix(written, `"`) {
		s, err := strconv.Unquote(written)
		return err == nil && n.Value == s
	}
	return n.Value == written
}
