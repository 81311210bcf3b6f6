package render

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// Templates run with missingkey=error, as Package Operator's do (its packagerender sets the same
// option), so a package that reads a key its configuration lacks fails in both rather than
// rendering "<no value>"; and sprig's default cannot help, since the lookup fails before it is
// called. text/template's error then says only `map has no entry for key "x"`: explainMissingKey
// says which map, the keys it has, how to test for an optional key, and where Helm's top-level
// names went.

// missingKeyRE finds the innermost failed lookup in text/template's error.
var missingKeyRE = regexp.MustCompile(`executing "([^"]*)" at <([^>]*)>: map has no entry for key "([^"]*)"`)

// helmNames are Helm's top-level names and where their values are in a package's context.
var helmNames = map[string]string{
	"Release":      "the Package's name is .package.metadata.name, its namespace .package.metadata.namespace",
	"Values":       "the configuration is .config",
	"Chart":        "the package's manifest is not in the context; its image is .package.image",
	"Capabilities": "the cluster's version is .environment.kubernetes.version",
	"Files":        "a file of the package is {{ getFile \"path\" }}, several {{ getFileGlob \"pattern\" }}",
}

// explainMissingKey rewrites a missing-key error of the file template t executed with data.
// The keys the map has are listed only where the lookup's dot is data itself: in the file's own
// template outside with and range, or from $ there. Other errors are returned as they are.
func explainMissingKey(t *template.Template, file string, data map[string]any, err error) error {
	msg := err.Error()
	loc := missingKeyRE.FindAllStringSubmatchIndex(msg, -1)
	if loc == nil {
		return err
	}
	m := loc[len(loc)-1]
	name, expr, key := msg[m[2]:m[3]], msg[m[4]:m[5]], msg[m[6]:m[7]]
	idents, rooted := rootedLookup(t, name, file, expr)
	prefix := lookupPrefix(expr, key)
	var held any
	if rooted {
		prefix, held = resolvePrefix(data, idents, key)
	}
	return errors.New(msg[:m[6]-len(`map has no entry for key "`)] + missingKeyText(prefix, key, held))
}

// missingKeyText explains that the map at prefix (".", ".config"; "" for the context itself)
// has no key; held is that map when known.
func missingKeyText(prefix, key string, held any) string {
	where := prefix
	if where == "" {
		where = "the context"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s has no key %q", where, key)
	if keys, ok := mapKeys(held); ok {
		if prefix == "" {
			for i := range keys {
				keys[i] = "." + keys[i]
			}
		}
		if len(keys) == 0 {
			b.WriteString(" (it has none)")
		} else {
			fmt.Fprintf(&b, " (it has: %s)", strings.Join(keys, ", "))
		}
	}
	if hint, ok := helmNames[key]; ok && prefix == "" {
		fmt.Fprintf(&b, "; Helm's .%s is not there: %s", key, hint)
		return b.String()
	}
	m := prefix
	if m == "" {
		m = "$"
	}
	if _, strMap := held.(map[string]string); !strMap {
		fmt.Fprintf(&b, "; test for an optional key with {{ if hasKey %s %q }} or {{ index %s %q | default \"d\" }}", m, key, m, key)
	} else {
		// sprig's hasKey takes map[string]interface{} only.
		fmt.Fprintf(&b, "; test for an optional key with {{ index %s %q | default \"d\" }}", m, key)
	}
	return b.String()
}

// mapKeys are the sorted keys of a map value.
func mapKeys(v any) ([]string, bool) {
	switch v := v.(type) {
	case map[string]any:
		return slices.Sorted(maps.Keys(v)), true
	case map[string]string:
		return slices.Sorted(maps.Keys(v)), true
	}
	return nil, false
}

// lookupPrefix is the part of the failed lookup expr before key, as the template spells it:
// ".config" for ".config.x", "." for ".x".
func lookupPrefix(expr, key string) string {
	i := strings.Index(expr+".", "."+key+".")
	if i <= 0 {
		return "."
	}
	return expr[:i]
}

// resolvePrefix follows idents (a rooted lookup's names) through data to the map that lacks
// key, and returns its path (".config"; "" for data) and the map.
func resolvePrefix(data map[string]any, idents []string, key string) (string, any) {
	var cur any = data
	path := ""
	for _, id := range idents {
		keys, ok := mapKeys(cur)
		if !ok {
			return path, nil
		}
		if !slices.Contains(keys, id) {
			if id == key {
				return path, cur
			}
			return path, nil
		}
		switch m := cur.(type) {
		case map[string]any:
			cur = m[id]
		case map[string]string:
			cur = m[id]
		}
		path += "." + id
	}
	return path, nil
}

// rootedLookup finds the lookup expr in the template name of t and returns its names, and
// whether they start at the render's data: name is the file's own template, and every lookup
// spelled expr there is outside with and range (or starts at $).
func rootedLookup(t *template.Template, name, file, expr string) ([]string, bool) {
	tt := t.Lookup(name)
	if name != file || tt == nil || tt.Tree == nil {
		return nil, false
	}
	var idents []string
	rooted, found := true, false
	walkLookups(tt.Root, false, func(n parse.Node, rebound bool) {
		if n.String() != expr {
			return
		}
		found = true
		switch n := n.(type) {
		case *parse.FieldNode:
			idents = n.Ident
			rooted = rooted && !rebound
		case *parse.VariableNode:
			idents = n.Ident[1:]
			rooted = rooted && n.Ident[0] == "$"
		default:
			rooted = false
		}
	})
	return idents, rooted && found
}

// walkLookups calls fn with every field and variable node under n and whether dot is rebound
// there (inside the body of with or range).
func walkLookups(n parse.Node, rebound bool, fn func(parse.Node, bool)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkLookups(c, rebound, fn)
		}
	case *parse.ActionNode:
		walkLookups(n.Pipe, rebound, fn)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, rebound, rebound, fn)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, rebound, true, fn)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, rebound, true, fn)
	case *parse.TemplateNode:
		walkLookups(n.Pipe, rebound, fn)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkLookups(c, rebound, fn)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkLookups(a, rebound, fn)
		}
	case *parse.FieldNode, *parse.VariableNode, *parse.ChainNode:
		fn(n, rebound)
	}
}

// walkBranch walks an if, with or range: its pipeline where it is, its body with dot rebound
// or not, its else where it is.
func walkBranch(b *parse.BranchNode, rebound, body bool, fn func(parse.Node, bool)) {
	walkLookups(b.Pipe, rebound, fn)
	walkLookups(b.List, body, fn)
	walkLookups(b.ElseList, rebound, fn)
}
