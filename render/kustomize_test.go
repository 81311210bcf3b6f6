package render

import (
	"path"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kustypes "sigs.k8s.io/kustomize/api/types"
)

// kustomizePackage is a package whose kustomization root one/ has local files to refer to,
// a nested directory, and a shared base outside the root.
func kustomizePackage(kustomization string, extra map[string]string) fstest.MapFS {
	files := map[string]string{
		"manifest.yaml":              "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  phases: [{name: one}]\n",
		"one/kustomization.yaml":     kustomization,
		"one/local.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n",
		"one/patch.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\ndata: {patched: \"yes\"}\n",
		"one/data.txt":               "some data\n",
		"one/app.env":                "A=1\n",
		"one/gen.yaml":               "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: generated}\nfiles: [data.txt]\noptions: {disableNameSuffixHash: true}\n",
		"one/sub/kustomization.yaml": "resources: [cm.yaml]\n",
		"one/sub/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nested}\n",
		"_base/kustomization.yaml":   "resources: [svc.yaml]\n",
		"_base/svc.yaml":             "apiVersion: v1\nkind: Service\nmetadata: {name: base}\nspec: {ports: [{port: 80}]}\n",
	}
	for name, data := range extra {
		files[name] = data
	}
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

// remoteGenerator is an inline ConfigMapGenerator that would make kustomize fetch a URL.
const remoteGenerator = "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: x}\nfiles: [\"https://169.254.169.254/latest/meta-data\"]\n"

// TestKustomizeRefusesReferencesOutsideThePackage: every path-like reference of a kustomization
// must name a file or directory of the package. Anything else would make kustomize clone a git
// repository, fetch a URL or read outside the package, and is refused before the build.
func TestKustomizeRefusesReferencesOutsideThePackage(t *testing.T) {
	t.Parallel()
	resources := []string{
		"git@github.com:org/repo",
		"GIT@github.com:x/y",
		"user@host:org/repo",
		"user@host/org/repo/dir",
		"git::https://example.com/org/repo",
		"https://example.com/x.yaml",
		"HTTPS://example.com/x.yaml",
		"hTTp://example.com/x.yaml",
		"ssh://git@example.com/org/repo",
		"file:///etc/passwd",
		"file:///tmp/repo//dir",
		"github.com/org/repo",
		"GitHub.com/org/repo//deploy?ref=v1",
		"GITHUB.COM:org/repo",
		"local.yaml?ref=v1",
		"sub?ref=main",
		"example.com/org/repo.git",
		"../outside",
		"../../outside",
		"sub/../../../outside",
		"/etc/passwd",
		"/one/local.yaml",
		"missing.yaml",
		"",
	}
	type hostile struct {
		name          string
		kustomization string
		extra         map[string]string
		want          []string // all in the error
	}
	var tests []hostile
	for _, r := range resources {
		tests = append(tests, hostile{
			name:          "resources " + r,
			kustomization: "resources:\n- local.yaml\n- " + yamlQuote(r) + "\n",
			want:          []string{"one/kustomization.yaml: resources: " + yamlQuote(r) + " is not a path inside the package"},
		})
	}
	tests = append(tests, []hostile{{
		name:          "resources key in another case",
		kustomization: "Resources:\n- https://example.com/x.yaml\n",
		want:          []string{`one/kustomization.yaml: resources: "https://example.com/x.yaml" is not a path inside the package`},
	}, {
		name:          "bases",
		kustomization: "bases: [github.com/org/repo]\n",
		want:          []string{`bases: "github.com/org/repo" is not a path inside the package`},
	}, {
		name:          "components",
		kustomization: "components: [\"https://example.com/c\"]\n",
		want:          []string{`components: "https://example.com/c" is not a path inside the package`},
	}, {
		name:          "crds",
		kustomization: "crds: [\"https://example.com/crd.yaml\"]\n",
		want:          []string{`crds: "https://example.com/crd.yaml" is not a path inside the package`},
	}, {
		name:          "configurations",
		kustomization: "configurations: [\"https://example.com/c.yaml\"]\n",
		want:          []string{`configurations: "https://example.com/c.yaml" is not a path inside the package`},
	}, {
		name:          "patches path",
		kustomization: "resources: [local.yaml]\npatches:\n- path: \"https://example.com/p.yaml\"\n",
		want:          []string{`patches[0].path: "https://example.com/p.yaml" is not a path inside the package`},
	}, {
		name:          "patchesJson6902 path",
		kustomization: "resources: [local.yaml]\npatchesJson6902:\n- path: ../outside.yaml\n  target: {version: v1, kind: ConfigMap, name: local}\n",
		want:          []string{`patchesJson6902[0].path: "../outside.yaml" is not a path inside the package`},
	}, {
		name:          "patchesStrategicMerge",
		kustomization: "resources: [local.yaml]\npatchesStrategicMerge: [\"https://example.com/p.yaml\"]\n",
		want:          []string{`patchesStrategicMerge: "https://example.com/p.yaml" is not a path inside the package`},
	}, {
		name:          "replacements path",
		kustomization: "resources: [local.yaml]\nreplacements:\n- path: \"http://169.254.169.254/latest\"\n",
		want:          []string{`replacements[0].path: "http://169.254.169.254/latest" is not a path inside the package`},
	}, {
		name:          "openapi path",
		kustomization: "resources: [local.yaml]\nopenapi: {path: \"https://example.com/schema.json\"}\n",
		want:          []string{`openapi.path: "https://example.com/schema.json" is not a path inside the package`},
	}, {
		name:          "configMapGenerator file with a key",
		kustomization: "configMapGenerator:\n- name: x\n  files: [\"key=https://example.com/f\"]\n",
		want:          []string{`configMapGenerator[0].files: "https://example.com/f" is not a path inside the package`},
	}, {
		name:          "configMapGenerator file",
		kustomization: "configMapGenerator:\n- name: x\n  files: [\"git@github.com:org/repo\"]\n",
		want:          []string{`configMapGenerator[0].files: "git@github.com:org/repo" is not a path inside the package`},
	}, {
		name:          "secretGenerator envs",
		kustomization: "secretGenerator:\n- name: x\n  envs: [../../etc/passwd]\n",
		want:          []string{`secretGenerator[0].envs: "../../etc/passwd" is not a path inside the package`},
	}, {
		name:          "secretGenerator env",
		kustomization: "secretGenerator:\n- name: x\n  env: \"https://example.com/e\"\n",
		want:          []string{`secretGenerator[0].env: "https://example.com/e" is not a path inside the package`},
	}, {
		name:          "generators URL",
		kustomization: "generators: [\"https://example.com/g.yaml\"]\n",
		want:          []string{`generators: "https://example.com/g.yaml" is not a path inside the package`},
	}, {
		name:          "transformers repository",
		kustomization: "transformers: [github.com/org/repo]\n",
		want:          []string{`transformers: "github.com/org/repo" is not a path inside the package`},
	}, {
		name:          "validators absolute",
		kustomization: "validators: [/etc/x]\n",
		want:          []string{`validators: "/etc/x" is not a path inside the package`},
	}, {
		name:          "inline generator fetching a URL",
		kustomization: "generators:\n- |\n" + indentLines(remoteGenerator, "  "),
		want:          []string{`one/kustomization.yaml: generators[0].files: "https://169.254.169.254/latest/meta-data" is not a path inside the package`},
	}, {
		name:          "one-line inline generator fetching a URL",
		kustomization: "generators:\n- \"{apiVersion: builtin, kind: ConfigMapGenerator, metadata: {name: x}, files: ['https://example.com/f']}\"\n",
		want:          []string{`one/kustomization.yaml: generators[0].files: "https://example.com/f" is not a path inside the package`},
	}, {
		name:          "inline generator field in another case",
		kustomization: "generators:\n- |\n" + indentLines(strings.Replace(remoteGenerator, "files:", "FILES:", 1), "  "),
		want:          []string{`one/kustomization.yaml: generators[0].files: "https://169.254.169.254/latest/meta-data" is not a path inside the package`},
	}, {
		name:          "generator file fetching a URL",
		kustomization: "generators: [remote-gen.yaml]\n",
		extra:         map[string]string{"one/remote-gen.yaml": remoteGenerator},
		want:          []string{`one/remote-gen.yaml: files: "https://169.254.169.254/latest/meta-data" is not a path inside the package`},
	}, {
		name:          "inline generator with a duplicate field",
		kustomization: "generators:\n- |\n" + indentLines(remoteGenerator+"files: [data.txt]\n", "  "),
		want:          []string{`one/kustomization.yaml: generators: "apiVersion: builtin\nkind: ConfigMapGenerator`, "is not a path inside the package"},
	}, {
		name:          "inline transformer patch from a URL",
		kustomization: "resources: [local.yaml]\ntransformers:\n- |\n  apiVersion: builtin\n  kind: PatchTransformer\n  metadata: {name: p}\n  path: \"https://example.com/p.yaml\"\n",
		want:          []string{`one/kustomization.yaml: transformers[0].path: "https://example.com/p.yaml" is not a path inside the package`},
	}, {
		name:          "inline transformer list item",
		kustomization: "resources: [local.yaml]\ntransformers:\n- |\n  apiVersion: v1\n  kind: List\n  items:\n  - apiVersion: builtin\n    kind: ValueAddTransformer\n    metadata: {name: v}\n    targetFilePath: \"https://example.com/t.yaml\"\n",
		want:          []string{`one/kustomization.yaml: transformers[0].items[0].targetFilePath: "https://example.com/t.yaml" is not a path inside the package`},
	}, {
		name:          "transformers directory",
		kustomization: "resources: [local.yaml]\ntransformers: [sub]\n",
		want:          []string{`transformers: "sub" is a directory`},
	}, {
		name:          "inline helm generator",
		kustomization: "generators:\n- |\n  apiVersion: builtin\n  kind: HelmChartInflationGenerator\n  metadata: {name: h}\n  name: x\n",
		want:          []string{`one/kustomization.yaml: generators[0]: HelmChartInflationGenerator is not supported`},
	}, {
		name:          "helmCharts",
		kustomization: "helmCharts:\n- name: x\n",
		want:          []string{"one/kustomization.yaml: helmCharts is not supported"},
	}, {
		name:          "helmGlobals",
		kustomization: "helmGlobals: {chartHome: ../../charts}\n",
		want:          []string{"one/kustomization.yaml: helmGlobals is not supported"},
	}}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Validate(t.Context(), kustomizePackage(tt.kustomization, tt.extra), Options{})
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "kustomize build", "refused before the build")
		})
	}
}

// TestKustomizeAcceptsLocalReferences builds kustomizations that refer only to the package.
func TestKustomizeAcceptsLocalReferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		kustomization string
		want          []string // kind/name of the objects of phase one
	}{{
		name:          "files, directories and a base outside the root",
		kustomization: "commonAnnotations: {pkgsync.dev/phase: one}\nresources:\n- local.yaml\n- sub\n- ../_base\n",
		want:          []string{"ConfigMap/local", "ConfigMap/nested", "Service/base"},
	}, {
		name:          "dot prefixes and trailing slashes",
		kustomization: "resources:\n- ./local.yaml\n- ./sub/\n",
		want:          []string{"ConfigMap/local", "ConfigMap/nested"},
	}, {
		name: "generator files with and without keys, env files",
		kustomization: "configMapGenerator:\n- name: gen\n  files: [data.txt, other=data.txt, sub/cm.yaml]\n  envs: [app.env]\n" +
			"secretGenerator:\n- name: sec\n  env: app.env\ngeneratorOptions: {disableNameSuffixHash: true}\n",
		want: []string{"ConfigMap/gen", "Secret/sec"},
	}, {
		name:          "patches from files and inline",
		kustomization: "resources: [local.yaml]\npatches:\n- path: patch.yaml\n- patch: |\n    - op: add\n      path: /data/inline\n      value: \"yes\"\n  target: {kind: ConfigMap}\npatchesStrategicMerge:\n- |\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: local}\n  data: {smp: \"yes\"}\n",
		want:          []string{"ConfigMap/local"},
	}, {
		name:          "generator and transformer configurations, inline and in files",
		kustomization: "resources: [local.yaml]\ngenerators: [gen.yaml]\ntransformers:\n- |\n  apiVersion: builtin\n  kind: LabelTransformer\n  metadata: {name: l}\n  labels: {team: a}\n  fieldSpecs: [{path: metadata/labels, create: true}]\n",
		want:          []string{"ConfigMap/generated", "ConfigMap/local"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := kustomizePackage(tt.kustomization, nil)
			res, err := Render(t.Context(), fsys, Options{})
			require.NoError(t, err)
			var got []string
			for _, o := range res.Phases[0].Objects {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			assert.ElementsMatch(t, tt.want, got)
		})
	}
}

// FuzzCheckKustomization feeds arbitrary kustomizations to the reference check, which reads
// what hostile packages write: it must never panic, and when it accepts one, kustomize must have
// nothing to fetch: no resource may look like a URL or a repository, or leave the package.
func FuzzCheckKustomization(f *testing.F) {
	for _, seed := range []string{
		"resources: [local.yaml, sub, ../_base]\n",
		"Resources: [\"GIT@github.com:x/y\"]\n",
		"generators:\n- |\n" + indentLines(remoteGenerator, "  "),
		"transformers: [\"{kind: PatchTransformer, path: 'https://x'}\"]\n",
		"configMapGenerator: [{name: x, files: [k=data.txt], envs: [app.env]}]\n",
		"patchesStrategicMerge: [\"apiVersion: v1\\nkind: ConfigMap\\n\"]\n",
		"openapi: {path: ../../x}\nhelmGlobals: {}\n",
		"resources: [&a x, *a]\n",
	} {
		f.Add(seed)
	}
	names := []string{"one/kustomization.yaml", "one/local.yaml", "one/data.txt", "one/app.env", "one/sub/kustomization.yaml", "_base/kustomization.yaml"}
	f.Fuzz(func(t *testing.T, data string) {
		pkg := newPackageFiles(names, map[string]string{"one/data.txt": "x"})
		errs := checkKustomization("one/kustomization.yaml", data, pkg)
		for _, e := range errs {
			assert.NotEmpty(t, e.File)
			assert.NotEmpty(t, e.Error())
		}
		if len(errs) > 0 {
			return
		}
		var k kustypes.Kustomization
		require.NoError(t, k.Unmarshal([]byte(data)))
		for _, r := range append(append(k.Resources, k.Bases...), k.Components...) { //nolint:staticcheck // kustomize still loads bases
			assert.False(t, looksRemote(r), "accepted %q", r)
			assert.False(t, strings.HasPrefix(path.Join("one", r), ".."), "accepted %q", r)
		}
	})
}

// yamlQuote writes s as a double-quoted YAML (and Go) string.
func yamlQuote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

func indentLines(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}
