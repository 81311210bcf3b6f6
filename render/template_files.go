package render

import (
	"encoding/base64"
	"fmt"
	"maps"
	"text/template"

	"github.com/bmatcuk/doublestar/v4"
)

// renderFuncs are the template functions that need the render's state: cel, and Package
// Operator's getFile, getFileGlob and b64decMap.
func renderFuncs(cel *celEvaluator, t *tree) template.FuncMap {
	files := make(map[string]string, len(t.files)+len(t.helpers))
	maps.Copy(files, t.files)
	maps.Copy(files, t.helpers)
	return template.FuncMap{
		"cel":         cel.templateFunc,
		"getFile":     getFile(files),
		"getFileGlob": getFileGlob(files),
		"b64decMap":   b64decMap,
	}
}

// getFile returns the content of a file of the package, by its path in the package as written
// (a template by its .gotmpl name, unrendered).
func getFile(files map[string]string) func(string) (string, error) {
	return func(path string) (string, error) {
		data, ok := files[path]
		if !ok {
			return "", fmt.Errorf("getFile %q: no such file in the package", path)
		}
		return data, nil
	}
}

// getFileGlob returns the files of the package whose path matches a glob (doublestar syntax,
// as spec.filter.paths: * within a directory, ** across directories), by path.
func getFileGlob(files map[string]string) func(string) (map[string]any, error) {
	return func(pattern string) (map[string]any, error) {
		if !doublestar.ValidatePattern(pattern) {
			return nil, fmt.Errorf("getFileGlob %q: not a valid glob", pattern)
		}
		out := map[string]any{}
		for path, data := range files {
			if doublestar.MatchUnvalidated(pattern, path) {
				out[path] = data
			}
		}
		return out, nil
	}
}

// b64decMap decodes the base64 string values of a map, such as a Secret's data; other values
// are left out.
func b64decMap(in map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(in))
	for k, v := range in {
		s, ok := v.(string)
		if !ok {
			continue
		}
		dec, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("b64decMap: key %q: %w", k, err)
		}
		out[k] = string(dec)
	}
	return out, nil
}
