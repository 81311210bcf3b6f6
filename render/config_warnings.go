package render

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"

	"pkgsync.dev/pkgsync/render/schema"
)

// Warning is something a render did that the package's user may not expect and that does not
// stop it: a configuration key the package's schema does not declare, dropped. Field and
// Message are spelled as a Kubernetes Status cause spells them: the message names the field.
type Warning struct {
	// Field is the path of the field, for example config.replica.
	Field string `json:"field,omitempty"`
	// Message says what happened, naming the field.
	Message string `json:"message"`
}

func (w Warning) String() string { return w.Message }

// ConfigWarnings returns the warnings a render of the package with opts.Config gives, and
// nothing else: whether the package or its configuration is valid is Validate's question. It
// answers where a failed render returns no Result: a dropped key is often why a required one is
// missing. A package whose manifest or schema cannot be read has none.
func ConfigWarnings(fsys fs.FS, opts Options) []Warning {
	fsys, _, err := packageRoot(fsys)
	if err != nil {
		return nil
	}
	c, errs := selectComponent(fsys, opts.Component)
	if len(errs) > 0 {
		return nil
	}
	manifest, file, pko, errs := readManifestFormat(c.fsys)
	if manifest == nil || len(errs) > 0 {
		return nil
	}
	m := mode{warnings: new([]Warning)}
	// The configuration's own errors are the render's to report; only its warnings are wanted.
	_, _, _ = configure(file, manifest, opts.Config, pko, m)
	return *m.warnings
}

// maxListedNames bounds the declared names a warning lists when none is near the key.
const maxListedNames = 10

// pruneConfig removes the keys of cfg that the schema does not declare, as the API server
// prunes unknown fields of a custom resource (pruning.PruneWithOptions, the same code), and
// returns a warning for each: kubectl's field validation (--validate=warn) says so too. Paths
// are the pruning package's, under "config".
func pruneConfig(cfg map[string]any, s *structuralschema.Structural, pko bool) []Warning {
	// The declared names are found before pruning, which removes what they are looked up for.
	declared := map[string][]string{}
	declaredNames(cfg, s, "config", declared)
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true, ParentPath: []string{"config"}}
	pruned := structuralpruning.PruneWithOptions(cfg, s, pko, opts)
	warnings := make([]Warning, 0, len(pruned))
	for _, p := range pruned {
		key := p[strings.LastIndexByte(p, '.')+1:]
		warnings = append(warnings, Warning{Field: p, Message: p + " is not in the package's configuration schema and is dropped" + nearest(key, declared[p])})
	}
	return warnings
}

// unschematized returns a warning for each key of cfg, which a Package Operator package
// without a schema drops.
func unschematized(cfg map[string]any) []Warning {
	var warnings []Warning
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		p := "config." + k
		warnings = append(warnings, Warning{Field: p, Message: p + " is dropped: the package declares no configuration schema"})
	}
	return warnings
}

// declaredNames records, under the path the pruning package gives each key of x that s does
// not declare, the names s declares beside it. It walks x as pruning does.
func declaredNames(x any, s *structuralschema.Structural, path string, out map[string][]string) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		names := slices.Sorted(maps.Keys(s.Properties))
		for k, v := range x {
			child := path + "." + k
			switch prop, ok := s.Properties[k]; {
			case ok:
				declaredNames(v, &prop, child, out)
			case s.AdditionalProperties != nil:
				declaredNames(v, s.AdditionalProperties.Structural, child, out)
			default:
				out[child] = names
			}
		}
	case []any:
		for i, v := range x {
			declaredNames(v, s.Items, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
}

// nearest is the tail of a warning about key: the declared name nearest to it (schema.Nearest,
// the rule of every "did you mean"), or the names declared when none is near.
func nearest(key string, names []string) string {
	if best := schema.Nearest(key, names); best != "" {
		return "; did you mean " + best + "?"
	}
	switch {
	case len(names) == 0:
		return " (it declares no field there)"
	case len(names) > maxListedNames:
		return fmt.Sprintf(" (it declares %s, ...)", strings.Join(names[:maxListedNames], ", "))
	}
	return " (it declares " + strings.Join(names, ", ") + ")"
}
