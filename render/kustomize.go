package render

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
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

// remoteReferences lists the entries of a kustomization that point outside the package.
// kustomize would fetch them over HTTP or run git to clone them, and offers no option to
// forbid that, so they are rejected before the build.
func remoteReferences(data string) ([]string, error) {
	var k map[string]any
	if err := yaml.Unmarshal([]byte(data), &k); err != nil {
		return nil, err
	}
	var refs []string
	check := func(field, s string) {
		if _, p, ok := strings.Cut(s, "="); ok && (field == "files" || field == "envs") {
			s = p
		}
		if looksRemote(s) {
			refs = append(refs, fmt.Sprintf("%s: %s", field, s))
		}
	}
	strs := func(field string, v any) {
		list, _ := v.([]any)
		for _, item := range list {
			if s, ok := item.(string); ok {
				check(field, s)
			}
		}
	}
	for _, f := range []string{"resources", "bases", "components", "crds", "generators", "transformers", "validators", "patchesStrategicMerge"} {
		strs(f, k[f])
	}
	for _, f := range []string{"patches", "patchesJson6902", "replacements"} {
		list, _ := k[f].([]any)
		for _, item := range list {
			if m, ok := item.(map[string]any); ok {
				if s, ok := m["path"].(string); ok {
					check(f+".path", s)
				}
			}
		}
	}
	for _, f := range []string{"configMapGenerator", "secretGenerator"} {
		list, _ := k[f].([]any)
		for _, item := range list {
			if m, ok := item.(map[string]any); ok {
				strs("files", m["files"])
				strs("envs", m["envs"])
				if s, ok := m["env"].(string); ok {
					check("env", s)
				}
			}
		}
	}
	if m, ok := k["openapi"].(map[string]any); ok {
		if s, ok := m["path"].(string); ok {
			check("openapi.path", s)
		}
	}
	if _, ok := k["helmCharts"]; ok {
		return refs, errors.New("helmCharts is not supported: kustomize would run helm; render the chart into the package instead")
	}
	return refs, nil
}

// looksRemote reports whether kustomize would treat s as a URL or a git repository rather than
// a path inside the package.
func looksRemote(s string) bool {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "://") || strings.HasPrefix(s, "git@") || strings.HasPrefix(s, "git::") ||
		strings.Contains(s, "?ref=") || strings.Contains(s, "?version=") || strings.Contains(s, "_git/") ||
		strings.Contains(s, ".git/") || strings.HasSuffix(s, ".git") {
		return true
	}
	first, _, _ := strings.Cut(path.Clean(s), "/")
	for _, host := range []string{"github.com", "gitlab.com", "bitbucket.org"} {
		if first == host {
			return true
		}
	}
	return false
}
