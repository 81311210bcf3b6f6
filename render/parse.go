package render

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/render/schema"
)

// document is one YAML document of a multi-document file.
type document struct {
	index     int    // 1-based position in the file
	startLine int    // 1-based line of the document's first line in the file
	body      string // the document without its separator
}

// splitDocuments splits a YAML stream on "---" lines. Written by hand because apimachinery's
// YAML reader does not say on which line each document starts, and errors must name lines of
// the file, not of the document.
func splitDocuments(data string) []document {
	var docs []document
	lines := strings.SplitAfter(data, "\n")
	var cur strings.Builder
	start := 1
	for i, line := range lines {
		if isSeparator(line) {
			docs = append(docs, document{index: len(docs) + 1, startLine: start, body: cur.String()})
			cur.Reset()
			start = i + 2
			continue
		}
		cur.WriteString(line)
	}
	docs = append(docs, document{index: len(docs) + 1, startLine: start, body: cur.String()})
	return docs
}

func isSeparator(line string) bool {
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "---") {
		return false
	}
	rest := line[3:]
	return rest == "" || rest[0] == ' ' || rest[0] == '\t'
}

// fieldLine is the line in the file of the field at path (a schema problem's Field) of the
// object decoded from doc, 0 when it cannot be found. The document is parsed again, as a node
// tree, which keeps lines: only for an object with problems to report.
func (doc document) fieldLine(path string) int {
	var root yaml3.Node
	if err := yaml3.Unmarshal([]byte(doc.body), &root); err != nil {
		return 0
	}
	if n := schema.FieldLine(&root, path); n > 0 {
		return doc.startLine + n - 1
	}
	return 0
}

// isBlank reports whether a document holds only whitespace, comments or an explicit null.
func isBlank(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "..." {
			return false
		}
	}
	return true
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlError rebases the line a YAML error mentions from the document onto the file.
func yamlError(file string, doc document, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		line = doc.startLine + n - 1
		msg = msg[:m[0]] + "line " + strconv.Itoa(line) + msg[m[1]:]
	}
	if line == 0 {
		line = doc.startLine
	}
	return &Error{File: file, Document: doc.index, Line: line, Err: fmt.Errorf("invalid YAML: %s", msg)}
}

// parsedObject is an object and where it was found: the document it was decoded from.
type parsedObject struct {
	obj *unstructured.Unstructured
	doc document
}

// keyRule says what a key repeated in one YAML mapping of an object file does.
type keyRule int

const (
	// repeatedKeyRefused refuses the document: pkgsync's own format, where a repeated key is
	// almost always a mistake that would silently drop what the first one held.
	repeatedKeyRefused keyRule = iota
	// repeatedKeyReplaces lets the later key replace the earlier one, value and all: Package
	// Operator decodes objects with sigs.k8s.io/yaml's Unmarshal (go.yaml.in/yaml/v2, not
	// strict), and its own packages rely on it.
	repeatedKeyReplaces
)

// parseObjects parses the Kubernetes objects of a multi-document YAML file. Blank documents are
// skipped; every broken document is reported, with the file's line numbers.
func parseObjects(file, data string, keys keyRule) ([]parsedObject, []*Error) {
	var objs []parsedObject
	var errs []*Error
	for _, doc := range splitDocuments(data) {
		if isBlank(doc.body) {
			continue
		}
		obj, err := parseObject(doc.body, keys)
		if err != nil {
			var perr *Error
			if errors.As(err, &perr) {
				// A line parseObject found is the document's.
				line := doc.startLine + max(perr.Line-1, 0)
				perr.File, perr.Document, perr.Line = file, doc.index, line
				errs = append(errs, perr)
				continue
			}
			errs = append(errs, yamlError(file, doc, err))
			continue
		}
		if obj == nil {
			continue
		}
		objs = append(objs, parsedObject{obj: obj, doc: doc})
	}
	return objs, errs
}

// parseObject decodes one YAML document into an object, nil for an explicit null. Syntax errors
// come back as plain errors, semantic ones as *Error with Field set.
func parseObject(body string, keys keyRule) (*unstructured.Unstructured, error) {
	toJSON := yaml.YAMLToJSONStrict
	if keys == repeatedKeyReplaces {
		toJSON = yaml.YAMLToJSON
	}
	js, err := toJSON([]byte(body))
	if err != nil {
		return nil, err
	}
	var v any
	// apimachinery's json keeps integers as int64, as the API machinery expects.
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil // an explicit null (null, ~): no object, as in Package Operator and kubectl
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Err: fmt.Errorf("a document must be a Kubernetes object (a mapping), not %s", describe(v))}
	}
	obj, err := newObject(m)
	locateBoolean(body, err)
	return obj, err
}

// newObject checks the fields every object needs.
func newObject(m map[string]any) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{Object: m}
	if err := BooleanFields(m); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, value string }{{"apiVersion", obj.GetAPIVersion()}, {"kind", obj.GetKind()}} {
		if s, ok := m[f.name].(string); !ok || s == "" {
			return nil, &Error{Field: f.name, Err: errors.New("required: every object needs apiVersion and kind")}
		}
	}
	meta, ok := m["metadata"].(map[string]any)
	if !ok {
		return nil, &Error{Field: "metadata", Err: errors.New("required: every object needs metadata.name")}
	}
	if name, ok := meta["name"].(string); !ok || name == "" {
		return nil, &Error{Field: "metadata.name", Err: errors.New("required: every object needs a name (generateName is not supported: the object could never be updated)")}
	}
	if a, ok := meta["annotations"]; ok && a != nil {
		am, ok := a.(map[string]any)
		if !ok {
			return nil, &Error{Field: "metadata.annotations", Err: errors.New("must be a map of strings")}
		}
		for k, v := range am {
			if _, ok := v.(string); !ok {
				return nil, &Error{Field: "metadata.annotations." + k, Err: fmt.Errorf("must be a string, not %s (quote it)", describe(v))}
			}
		}
	}
	return obj, nil
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a mapping"
	default:
		return "a number"
	}
}
