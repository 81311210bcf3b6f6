package render

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// hostedEnv is the environment of a package installed in the hosted-control-plane namespace
// clusters-demo of the HostedCluster clusters/demo.
var hostedEnv = Environment{
	KubernetesVersion: "v1.36.3",
	HostedCluster:     &HostedCluster{Name: "demo", Namespace: "clusters", HostedClusterNamespace: "clusters-demo"},
}

func renderYAML(t *testing.T, dir string, opts Options) []byte {
	t.Helper()
	res, err := Render(t.Context(), os.DirFS(dir), opts)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, res.WriteYAML(&buf))
	return buf.Bytes()
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		dir  string
		opts Options
	}{
		{"hosted-addon", "../packages-example/hosted-addon", Options{Name: "addon", Namespace: "clusters-demo", Environment: hostedEnv}},
		{"hosted-addon-config", "../packages-example/hosted-addon", Options{Name: "addon", Namespace: "clusters-demo", Config: []byte("replicas: 3\nlogLevel: debug\nhostedNamespace: team-a\n")}},
		{"simple", "../packages-example/simple", Options{Namespace: "apps"}},
		{"pko", "testdata/packages/pko", Options{Name: "addon", Namespace: "clusters-demo", Environment: hostedEnv}},
		{"kustomize-root", "testdata/packages/kustomize-root", Options{}},
		{"kustomize-dirs", "testdata/packages/kustomize-dirs", Options{Config: []byte(`{"message": "from config"}`)}},
		{"pko-filter", "testdata/packages/pko-filter", Options{Namespace: "apps", Environment: hostedEnv}},
		{"pko-filter-ha", "testdata/packages/pko-filter", Options{Namespace: "apps", Config: []byte(`{"mode": "ha", "monitoring": true, "endpoint": "http://metrics:9090"}`), Environment: hostedEnv}},
		{"pko-components-backend", "testdata/packages/pko-components", Options{Name: "addon", Namespace: "clusters-demo", Component: "backend", Environment: hostedEnv}},
		{"config", "testdata/packages/config", Options{Config: []byte(`{"name": "abc", "unknown": 1, "free": {"x": 1}}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := renderYAML(t, tt.dir, tt.opts)
			// Determinism: a second render of the same inputs gives the same bytes.
			assert.Equal(t, string(got), string(renderYAML(t, tt.dir, tt.opts)), "second render differs")

			golden := filepath.Join("testdata", "golden", tt.name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./render -update to create the golden file")
			assert.Equal(t, string(want), string(got))
		})
	}
}

func TestRenderThreePhaseExample(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), os.DirFS("../packages-example/hosted-addon"), Options{Name: "addon", Namespace: "clusters-demo", Environment: hostedEnv})
	require.NoError(t, err)

	type obj struct{ kind, namespace, name string }
	got := map[string][]obj{}
	var classes []string
	for _, p := range res.Phases {
		classes = append(classes, p.Name+"="+p.Class)
		for _, o := range p.Objects {
			got[p.Name] = append(got[p.Name], obj{o.GetKind(), o.GetNamespace(), o.GetName()})
			assert.NotContains(t, o.GetAnnotations(), v1alpha1.PhaseAnnotation, "phase annotation must be stripped")
		}
	}
	assert.Equal(t, []string{"hosted-rbac=hosted-cluster", "deploy=", "configure=hosted-cluster"}, classes)
	assert.Equal(t, []obj{
		{"Namespace", "", "hosted-addon"},
		{"ServiceAccount", "hosted-addon", "hosted-addon-operator"},
		{"ClusterRole", "", "hosted-addon-operator"},
		{"ClusterRoleBinding", "", "hosted-addon-operator"},
	}, got["hosted-rbac"])
	assert.Equal(t, []obj{{"Deployment", "clusters-demo", "addon-operator"}}, got["deploy"])
	assert.Equal(t, []obj{
		{"ConfigMap", "hosted-addon", "hosted-addon-config"},
		{"Role", "hosted-addon", "hosted-addon-config-reader"},
	}, got["configure"])

	// Schema defaults reach the templates and the result.
	assert.Equal(t, map[string]any{
		"replicas": int64(1), "logLevel": "info", "hostedNamespace": "hosted-addon",
		"greeting": "hello from the management cluster",
	}, res.Config)
	require.Len(t, res.Manifest.Spec.AvailabilityProbes, 1)
	assert.Equal(t, ".status.updatedReplicas", res.Manifest.Spec.AvailabilityProbes[0].Probes[1].FieldsEqual.FieldA)
}

func TestRenderPackageOperatorFormat(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), os.DirFS("testdata/packages/pko"), Options{Name: "addon", Namespace: "clusters-demo", Environment: hostedEnv})
	require.NoError(t, err, "Package Operator-only fields and .hidden/ must be ignored, the lock file read")

	assert.Equal(t, v1alpha1.GroupVersion.String(), res.Manifest.APIVersion, "manifest converted to pkgsync's format")
	require.Len(t, res.Phases, 2)
	assert.Equal(t, v1alpha1.ClassHostedCluster, res.Phases[0].Class)
	deploy := res.Phases[1].Objects[0]
	assert.Equal(t, map[string]string{"example.com/kept": "yes"}, deploy.GetAnnotations(), "only phase annotations are stripped")
	ns := res.Phases[0].Objects[0]
	assert.Equal(t, "demo-addon", ns.GetName())
	assert.Nil(t, ns.GetAnnotations(), "an annotation map left empty is removed")
}

func TestRenderConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		config     string
		wantConfig map[string]any
		wantFields []string // of *ConfigError, in order
	}{{
		name:   "defaults and pruning",
		config: `{"name": "abc", "unknown": {"deep": true}, "resources": {"extra": 1}, "free": {"kept": [1]}}`,
		wantConfig: map[string]any{
			"name": "abc", "replicas": int64(2), "mode": "safe",
			"resources": map[string]any{"cpu": "10m"},
			"free":      map[string]any{"kept": []any{int64(1)}},
		},
	}, {
		name:       "yaml config",
		config:     "name: abcd\nreplicas: 4\n",
		wantConfig: map[string]any{"name": "abcd", "replicas": int64(4), "mode": "safe", "resources": map[string]any{"cpu": "10m"}},
	}, {
		name:       "every violation with its field path",
		config:     `{"name": "ab", "replicas": 0, "mode": "slow", "tags": ["a", 1], "resources": {"cpu": 5}}`,
		wantFields: []string{"config.mode", "config.name", "config.replicas", "config.resources.cpu", "config.tags[1]"},
	}, {
		name:       "required field",
		config:     ``,
		wantFields: []string{"config.name"},
	}, {
		name:       "not an object",
		config:     `[1, 2]`,
		wantFields: []string{"config"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), os.DirFS("testdata/packages/config"), Options{Config: []byte(tt.config)})
			if tt.wantFields == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.wantConfig, res.Config)
				return
			}
			require.Error(t, err)
			var cfgErr *ConfigError
			require.ErrorAs(t, err, &cfgErr, "a controller tells invalid configuration apart with errors.As")
			var problems Errors
			require.ErrorAs(t, err, &problems)
			var fields []string
			for _, p := range problems {
				require.ErrorAs(t, p, &cfgErr)
				fields = append(fields, cfgErr.Field)
			}
			assert.Equal(t, tt.wantFields, fields)
		})
	}
}

// wantError describes one expected problem; zero fields are not checked except Document and
// Line, which must match.
type wantError struct {
	file     string
	document int
	line     int
	field    string
	contains string
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dir  string
		opts Options
		want []wantError
	}{{
		dir: "bad-yaml",
		want: []wantError{
			{file: "objects.yaml", document: 2, line: 12, contains: "invalid YAML: yaml: line 12: mapping values are not allowed"},
			{file: "objects.yaml", document: 3, line: 14, contains: "must be a Kubernetes object (a mapping), not a list"},
			{file: "objects.yaml", document: 4, line: 16, field: "apiVersion", contains: "required"},
		},
	}, {
		dir: "bad-template",
		want: []wantError{
			{file: "clock.yaml.gotmpl", line: 6, contains: `function "now" not defined`},
			{file: "missing-key.yaml.gotmpl", line: 4, contains: `has no key "nothere"`},
			{file: "parse-error.yaml.gotmpl", line: 3, contains: "missing value for if"},
			{file: "bad-output.yaml.gotmpl", document: 1, line: 4, contains: "invalid YAML"},
		},
	}, {
		dir: "bad-phases",
		want: []wantError{
			{file: "objects.yaml", document: 1, line: 1, field: "metadata.annotations", contains: `ConfigMap unknown: unknown phase "three": the manifest declares one, two`},
			{file: "objects.yaml", document: 2, line: 8, field: "metadata.annotations", contains: "missing phase: add the annotation pkgsync.dev/phase"},
			{file: "objects.yaml", document: 3, line: 13, field: "metadata.annotations", contains: "disagree"},
			{file: "objects.yaml", document: 5, line: 28, field: "metadata.name", contains: "duplicate object, already defined in objects.yaml (document 4)"},
		},
	}, {
		dir: "kustomize-remote",
		want: []wantError{
			{file: "one/kustomization.yaml", field: "resources", contains: `"https://raw.githubusercontent.com/example/repo/main/deploy.yaml" is not a path inside the package; remote bases are not allowed`},
			{file: "one/kustomization.yaml", field: "resources", contains: `"github.com/example/repo//deploy?ref=v1.0.0" is not a path inside the package; remote bases are not allowed`},
		},
	}, {
		dir: "kustomize-broken",
		want: []wantError{
			{file: "one/kustomization.yaml", contains: "kustomize build: accumulating resources"},
		},
	}, {
		dir: "bad-manifest",
		want: []wantError{
			{file: "manifest.yaml", field: "spec.phases[0].class", contains: `unsupported class "somewhere-else"`},
			{file: "manifest.yaml", field: "spec.phases[1].name", contains: `duplicate phase "one"`},
			{file: "manifest.yaml", field: "spec.images[0].image", contains: "required"},
			{file: "manifest.yaml", field: "spec.availabilityProbes[0].selector", contains: "required"},
			{file: "manifest.yaml", field: "spec.availabilityProbes[0].probes[0]", contains: "exactly one of condition, fieldsEqual or cel"},
		},
	}, {
		dir: "bad-schema",
		want: []wantError{
			{file: "manifest.yaml", field: "spec.config.openAPIV3Schema.properties[untyped].type", contains: "Required value: must not be empty for specified object fields"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			t.Parallel()
			err := Validate(t.Context(), os.DirFS(filepath.Join("testdata/packages", tt.dir)), tt.opts)
			require.Error(t, err)
			var cfgErr *ConfigError
			assert.False(t, errors.As(err, &cfgErr), "a broken package is not a configuration error")
			var problems Errors
			require.ErrorAs(t, err, &problems)
			require.Len(t, problems, len(tt.want), "problems: %v", err)
			for i, w := range tt.want {
				var e *Error
				require.ErrorAs(t, problems[i], &e)
				assert.Equal(t, w.file, e.File, "problem %d: %v", i, e)
				assert.Equal(t, w.document, e.Document, "problem %d: %v", i, e)
				assert.Equal(t, w.line, e.Line, "problem %d: %v", i, e)
				assert.Equal(t, w.field, e.Field, "problem %d: %v", i, e)
				assert.Contains(t, e.Error(), w.contains, "problem %d", i)
			}
		})
	}
}

func TestRenderPackageRules(t *testing.T) {
	t.Parallel()
	const manifest = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  phases: [{name: one}]\n"
	obj := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations: {pkgsync.dev/phase: one}\n"
	}
	tests := []struct {
		name    string
		files   map[string]string
		want    []string // object names in phase one
		wantErr string
	}{{
		name: "yaml and yml, sorted by path, blank documents skipped",
		files: map[string]string{
			"b.yml":        obj("b"),
			"a.yaml":       "# only a comment\n---\n" + obj("a1") + "---\n---\n" + obj("a2"),
			"notes.txt":    "not an object",
			"data.json":    `{"apiVersion": "v1"}`,
			"sub/c.yaml":   obj("c"),
			"README.md":    "# readme",
			"manifest.yml": manifest,
		},
		want: []string{"a1", "a2", "b", "c"},
	}, {
		name: "dot-files and dot-directories skipped",
		files: map[string]string{
			"manifest.yaml":      manifest,
			".git/x.yaml":        "broken: [",
			".hidden.yaml":       "broken: [",
			"sub/.also.yaml":     "broken: [",
			"ok.yaml":            obj("ok"),
			"sub/.dir/deep.yaml": "broken: [",
		},
		want: []string{"ok"},
	}, {
		name: "underscore files are helpers, underscore directories are not loaded",
		files: map[string]string{
			"manifest.yaml":    manifest,
			"_helpers.yaml":    `{{ define "n" }}from-helper{{ end }}`,
			"sub/_more.tpl":    `{{ define "m" }}{{ include "n" . }}-nested{{ end }}`,
			"_base/plain.yaml": "broken: [",
			"t.yaml.gotmpl":    obj(`{{ include "m" . }}`),
		},
		want: []string{"from-helper-nested"},
	}, {
		name: "template and rendered name clash",
		files: map[string]string{
			"manifest.yaml": manifest,
			"a.yaml":        obj("a"),
			"a.yaml.gotmpl": obj("b"),
		},
		wantErr: "both a.yaml.gotmpl and a.yaml exist",
	}, {
		name: "include recursion is bounded",
		files: map[string]string{
			"manifest.yaml": manifest,
			"_loop.tpl":     `{{ define "loop" }}{{ include "loop" . }}{{ end }}`,
			"a.yaml.gotmpl": `{{ include "loop" . }}`,
		},
		wantErr: "nested more than 100 deep",
	}, {
		name: "broken helper reported against itself",
		files: map[string]string{
			"manifest.yaml": manifest,
			"_broken.tpl":   "{{ define \"x\" }}\n{{ end }}{{ end }}",
			"a.yaml":        obj("a"),
		},
		wantErr: "_broken.tpl:2: template: unexpected {{end}}",
	}, {
		name: "toYAML and fromYAML",
		files: map[string]string{
			"manifest.yaml": manifest,
			"a.yaml.gotmpl": `{{ $m := fromYAML "name: from-yaml" }}` + obj(`{{ $m.name }}`) + "data:\n  x: {{ toYAML (dict \"k\" \"v\") | quote }}\n",
		},
		want: []string{"from-yaml"},
	}, {
		name: "generateName is refused",
		files: map[string]string{
			"manifest.yaml": manifest,
			"a.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: x-}\n",
		},
		wantErr: "a.yaml:1 (document 1): metadata.name: required",
	}, {
		name: "kustomize helmCharts refused",
		files: map[string]string{
			"manifest.yaml":          manifest,
			"one/kustomization.yaml": "helmCharts:\n- name: x\n",
		},
		wantErr: "helmCharts is not supported",
	}, {
		name:    "missing manifest",
		files:   map[string]string{"a.yaml": obj("a")},
		wantErr: "manifest.yaml: missing",
	}, {
		name: "wrong manifest apiVersion",
		files: map[string]string{
			"manifest.yaml": "apiVersion: example.com/v1\nkind: PackageManifest\n",
		},
		wantErr: "manifest.yaml: apiVersion: must be pkgsync.dev/v1alpha1",
	}, {
		name: "unknown manifest field in pkgsync's format",
		files: map[string]string{
			"manifest.yaml": manifest + "  surprise: true\n",
		},
		wantErr: `manifest.yaml: decode manifest: json: unknown field "surprise"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{}
			for name, data := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			res, err := Render(t.Context(), fsys, Options{})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, o := range res.Phases[0].Objects {
				names = append(names, o.GetName())
			}
			assert.Equal(t, tt.want, names)
		})
	}
}

func TestTemplateFunctionsAreSafe(t *testing.T) {
	t.Parallel()
	fm := newTemplater(t.Context(), nil, nil, nil, nil).funcs
	for _, name := range unsafeFuncs {
		assert.NotContains(t, fm, name)
	}
	for _, name := range []string{"toYAML", "fromYAML", "quote", "nindent", "dict", "b64enc", "sha256sum", "default", "toJson"} {
		assert.Contains(t, fm, name)
	}
}

func TestRenderCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Render(ctx, os.DirFS("../packages-example/hosted-addon"), Options{})
	require.ErrorIs(t, err, context.Canceled)
}

// A caller that hands Render os.DirFS itself, rather than a tree read by source.LoadDir, still
// gets no file outside the package: a link is refused, never followed into getFile's reach.
func TestRenderRefusesSymlinkedFiles(t *testing.T) {
	t.Parallel()
	const secret = "outside-secret-51e0"
	outside := filepath.Join(t.TempDir(), "passwd")
	require.NoError(t, os.WriteFile(outside, []byte(secret), 0o600))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(
		"apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: demo\nspec:\n  phases:\n  - name: deploy\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml.gotmpl"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stolen\n  annotations: {pkgsync.dev/phase: deploy}\ndata:\n  passwd: {{ getFile \"passwd.txt\" | quote }}\n"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "passwd.txt")))

	res, err := Render(t.Context(), os.DirFS(dir), Options{})
	if res != nil {
		var buf bytes.Buffer
		require.NoError(t, res.WriteYAML(&buf))
		assert.NotContains(t, buf.String(), secret, "a file outside the package was rendered")
	}
	require.ErrorContains(t, err, "passwd.txt is not a regular file")
}
