package render

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizationFiles are the file names that make a directory a kustomization.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomizer builds the package's kustomizations from an in-memory copy of the (rendered)
// package, so kustomize can reach nothing outside it.
type kustomizer struct {
	fs filesys.FileSystem
}

func newKustomizer(files map[string]string) (*kustomizer, error) {
	fsys := filesys.MakeFsInMemory()
	for name, data := range files {
		if err := fsys.WriteFile("/"+name, []byte(data)); err != nil {
			return nil, fmt.Errorf("stage %s for kustomize: %w", name, err)
		}
	}
	return &kustomizer{fs: fsys}, nil
}

// build runs kustomize on dir with root-only load restrictions and builtin plugins only.
func (k *kustomizer) build(dir string) ([]*unstructured.Unstructured, error) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustypes.LoadRestrictionsRootOnly
	opts.PluginConfig = kustypes.DisabledPluginConfig()
	opts.AddManagedbyLabel = false
	resources, err := krusty.MakeKustomizer(opts).Run(k.fs, path.Join("/", dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON rather than r.Map(): kyaml decodes integers as int, which unstructured
		// objects must not hold (DeepCopy panics on it); apimachinery's json gives int64.
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)
		}
		var m map[string]any
		if err := utiljson.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)
		}
		obj, err := newObject(m)
		if err != nil {
			return nil, fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// packageFiles is the package as kustomize sees it: every file by its name after rendering, and
// the directories that hold them.
type packageFiles struct {
	files   sets.Set[string]
	dirs    sets.Set[string]
	content map[string]string // what kustomize reads; templates not rendered are absent
}

func newPackageFiles(names []string, rendered map[string]string) *packageFiles {
	pkg := &packageFiles{files: sets.New(names...), dirs: sets.New("."), content: rendered}
	for _, n := range names {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			pkg.dirs.Insert(d)
		}
	}
	return pkg
}

// checkKustomization checks, before kustomize runs, that every path-like reference of the
// kustomization file names a file or directory of the package. kustomize would clone a git
// repository or fetch a URL for anything else, and has no option to forbid that; reading the
// kustomization as a list of allowed references is the only way to be sure it cannot. The
// errors name the package file (as rendered) they are about.
func checkKustomization(file, data string, pkg *packageFiles) []*Error {
	var k kustypes.Kustomization
	// kustomize's own decoding: its field names match in any case, so reading them any other
	// way could miss one.
	if err := k.Unmarshal([]byte(data)); err != nil {
		return []*Error{{File: file, Err: fmt.Errorf("kustomization: %w", err)}}
	}
	c := &refChecker{file: file, dir: path.Dir(file), pkg: pkg}
	for _, helm := range []struct {
		name string
		set  bool
	}{
		{"helmCharts", len(k.HelmCharts) > 0},
		{"helmGlobals", k.HelmGlobals != nil},
		{"helmChartInflationGenerator", len(k.HelmChartInflationGenerator) > 0},
	} {
		if helm.set {
			c.fail(file, "", fmt.Errorf("%s is not supported: kustomize would run helm; render the chart into the package instead", helm.name))
		}
	}
	for _, f := range []struct {
		name  string
		paths []string
	}{
		{"resources", k.Resources},
		{"bases", k.Bases}, //nolint:staticcheck // deprecated, but kustomize still loads it
		{"components", k.Components},
		{"crds", k.Crds},
		{"configurations", k.Configurations},
	} {
		for _, p := range f.paths {
			c.path(file, f.name, p)
		}
	}
	for _, p := range k.PatchesStrategicMerge { //nolint:staticcheck // deprecated, but kustomize still loads it
		c.patch(file, "patchesStrategicMerge", string(p))
	}
	for i, p := range k.Patches {
		c.optionalPath(file, fmt.Sprintf("patches[%d].path", i), p.Path)
	}
	for i, p := range k.PatchesJson6902 { //nolint:staticcheck // deprecated, but kustomize still loads it
		c.optionalPath(file, fmt.Sprintf("patchesJson6902[%d].path", i), p.Path)
	}
	for i, r := range k.Replacements {
		c.optionalPath(file, fmt.Sprintf("replacements[%d].path", i), r.Path)
	}
	if p, ok := k.OpenAPI["path"]; ok {
		c.path(file, "openapi.path", p)
	}
	for i, g := range k.ConfigMapGenerator {
		c.sources(file, fmt.Sprintf("configMapGenerator[%d]", i), g.KvPairSources)
	}
	for i, g := range k.SecretGenerator {
		c.sources(file, fmt.Sprintf("secretGenerator[%d]", i), g.KvPairSources)
	}
	c.checkSelectors(file, &k)
	c.plugins("generators", k.Generators)
	c.plugins("transformers", k.Transformers)
	c.plugins("validators", k.Validators)
	return c.errs
}

// refChecker checks the references of one kustomization, which kustomize resolves against its
// directory.
type refChecker struct {
	file string // the kustomization
	dir  string
	pkg  *packageFiles
	errs []*Error
}

func (c *refChecker) fail(file, field string, err error) {
	c.errs = append(c.errs, &Error{File: file, Field: field, Err: err})
}

// resolve returns the package file or directory ref names, or why it names none.
func (c *refChecker) resolve(ref string) (string, error) {
	notInside := func(reason string) error {
		return fmt.Errorf("%q is not a path inside the package; %s", ref, reason)
	}
	switch {
	case ref == "":
		return "", notInside("it is empty")
	case looksRemote(ref):
		return "", notInside("remote bases are not allowed")
	case path.IsAbs(ref):
		return "", notInside("absolute paths are not allowed")
	}
	p := path.Join(c.dir, ref)
	switch {
	case p == ".." || strings.HasPrefix(p, "../"):
		return "", notInside("it leads out of the package")
	case !c.pkg.files.Has(p) && !c.pkg.dirs.Has(p):
		return "", notInside("the package has no such file or directory")
	}
	return p, nil
}

func (c *refChecker) path(file, field, ref string) {
	if _, err := c.resolve(ref); err != nil {
		c.fail(file, field, err)
	}
}

// optionalPath checks ref when it is set: patches may be inline instead.
func (c *refChecker) optionalPath(file, field, ref string) {
	if ref != "" {
		c.path(file, field, ref)
	}
}

// sources checks a generator's files ([key=]path) and env files.
func (c *refChecker) sources(file, field string, src kustypes.KvPairSources) {
	for _, f := range src.FileSources {
		if _, p, ok := strings.Cut(f, "="); ok {
			f = p
		}
		c.path(file, field+".files", f)
	}
	for _, e := range src.EnvSources {
		c.path(file, field+".envs", e)
	}
	c.optionalPath(file, field+".env", src.EnvSource)
}

// patch checks a strategic merge patch: a path, or for kustomize's legacy form the patch itself.
func (c *refChecker) patch(file, field, entry string) {
	if startsRemote(entry) {
		c.path(file, field, entry) // refused, with the reason
		return
	}
	if _, ok := inlineDocuments(entry); ok {
		return
	}
	c.path(file, field, entry)
}

// plugins checks the generators, transformers or validators of the kustomization. Each is a
// plugin configuration, inline or in a file, and builtin plugins read files too: their own
// references are checked like the kustomization's. A directory is refused: the kustomization it
// holds could build configurations no check here sees.
func (c *refChecker) plugins(field string, entries []string) {
	for i, e := range entries {
		item := fmt.Sprintf("%s[%d]", field, i)
		if !startsRemote(e) {
			if docs, ok := inlineDocuments(e); ok {
				for _, d := range docs {
					c.pluginConfig(c.file, item, d)
				}
				continue
			}
		}
		p, err := c.resolve(e)
		if err != nil {
			c.fail(c.file, field, err)
			continue
		}
		if c.pkg.dirs.Has(p) {
			c.fail(c.file, field, fmt.Errorf("%q is a directory; %s must be configuration files or inline configuration", e, field))
			continue
		}
		data, ok := c.pkg.content[p]
		if !ok {
			continue // a template not rendered: kustomize cannot read it either
		}
		docs, err := yamlDocuments(data)
		if err != nil {
			c.fail(p, "", fmt.Errorf("%s configuration: %w", field, err))
			continue
		}
		for _, d := range docs {
			c.pluginConfig(p, "", d)
		}
	}
}

// pluginFields are the fields in which kustomize's builtin plugins name files to read, by
// plugin kind: ConfigMapGenerator, SecretGenerator (files, envs, env), PatchTransformer and
// PatchJson6902Transformer (path), PatchStrategicMergeTransformer (paths),
// ReplacementTransformer (replacements[].path), ValueAddTransformer (targetFilePath).
var pluginFields = map[string][]string{
	"configmapgenerator":             {"files", "envs", "env"},
	"secretgenerator":                {"files", "envs", "env"},
	"patchtransformer":               {"path"},
	"patchjson6902transformer":       {"path"},
	"patchstrategicmergetransformer": {"paths"},
	"replacementtransformer":         {"replacements"},
	"valueaddtransformer":            {"targetFilePath"},
}

// pluginConfig checks one plugin configuration decoded from file, under field (empty when the
// file holds only configurations). It looks into lists and List items as kustomize's reader does.
func (c *refChecker) pluginConfig(file, field string, v any) {
	sub := func(name string) string {
		if field == "" {
			return name
		}
		return field + "." + name
	}
	switch v := v.(type) {
	case []any:
		for i, item := range v {
			c.pluginConfig(file, fmt.Sprintf("%s[%d]", field, i), item)
		}
	case map[string]any:
		if items, ok := v["items"].([]any); ok {
			for i, item := range items {
				c.pluginConfig(file, sub(fmt.Sprintf("items[%d]", i)), item)
			}
		}
		kind, _ := v["kind"].(string)
		if strings.EqualFold(kind, "HelmChartInflationGenerator") {
			c.fail(file, field, errors.New("HelmChartInflationGenerator is not supported: kustomize would run helm; render the chart into the package instead"))
			return
		}
		for _, name := range pluginFields[strings.ToLower(kind)] {
			// Plugins decode their configuration as JSON does, matching field names in any
			// case: check every key that could be taken for this field.
			for _, key := range slices.Sorted(maps.Keys(v)) {
				if strings.EqualFold(key, name) {
					c.pluginPaths(file, sub(name), name, v[key])
				}
			}
		}
	}
}

// pluginPaths checks every string of the value of a plugin field name.
func (c *refChecker) pluginPaths(file, field, name string, v any) {
	switch v := v.(type) {
	case string:
		switch name {
		case "files":
			if _, p, ok := strings.Cut(v, "="); ok {
				v = p
			}
		case "paths":
			c.patch(file, field, v)
			return
		}
		c.path(file, field, v)
	case []any:
		for i, item := range v {
			if name == "replacements" {
				c.pluginPaths(file, fmt.Sprintf("%s[%d]", field, i), name, item)
				continue
			}
			c.pluginPaths(file, field, name, item)
		}
	case map[string]any:
		if name == "replacements" {
			for _, key := range slices.Sorted(maps.Keys(v)) {
				if strings.EqualFold(key, "path") {
					c.pluginPaths(file, field+".path", "path", v[key])
				}
			}
		}
	}
}

// inlineDocuments decodes a generators, transformers, validators or patchesStrategicMerge entry
// that holds YAML rather than names a file: kustomize takes an entry that decodes to objects as
// the configuration itself.
func inlineDocuments(entry string) ([]any, bool) {
	docs, err := yamlDocuments(entry)
	if err != nil {
		return nil, false
	}
	for _, d := range docs {
		switch d.(type) {
		case map[string]any, []any:
			return docs, true
		}
	}
	return nil, false
}

// yamlDocuments decodes a multi-document YAML stream, skipping empty documents. Duplicate keys
// are refused: this decoder and kustomize's could each keep a different one.
func yamlDocuments(data string) ([]any, error) {
	var docs []any
	for _, d := range splitDocuments(data) {
		var v any
		if err := yaml.UnmarshalStrict([]byte(d.body), &v); err != nil {
			return nil, err
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
	return docs, nil
}

// remoteUser is how kustomize recognizes the user of an scp-like git address (user@host:path).
var remoteUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// startsRemote reports whether kustomize would take s for a URL (http, https) or a git
// repository (ssh://, file://, git::, user@, github.com) from how it starts, whatever follows.
func startsRemote(s string) bool {
	lower := strings.ToLower(s)
	for _, prefix := range []string{"http:", "https:", "ssh://", "file://", "git::", "github.com/", "github.com:"} {
		if strings.HasPrefix(lower, prefix) {
			return true
		}
	}
	return remoteUser.MatchString(s)
}

// looksRemote reports whether a reference has what a URL or a git address needs and a package
// path does not: a scheme or port (:), a user (@), a query (?ref=), or a github.com prefix. It
// is deliberately broad: kustomize decides on such syntax before it looks for a local file.
func looksRemote(s string) bool {
	return strings.ContainsAny(s, ":@?") || startsRemote(s)
}
