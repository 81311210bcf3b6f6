package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonCompatible reports the first value below v that JSON decoding would not produce, as
// unstructured.Unstructured requires: DeepCopy panics on anything else, int included.
func jsonCompatible(v any) (string, bool) {
	switch v := v.(type) {
	case nil, string, bool, int64, float64:
		return "", true
	case map[string]any:
		for k, x := range v {
			if where, ok := jsonCompatible(x); !ok {
				return "." + k + where, false
			}
		}
		return "", true
	case []any:
		for _, x := range v {
			if where, ok := jsonCompatible(x); !ok {
				return "[]" + where, false
			}
		}
		return "", true
	default:
		return fmt.Sprintf(" (%T)", v), false
	}
}

func TestRenderedObjectsDeepCopy(t *testing.T) {
	t.Parallel()
	examples, err := filepath.Glob("../packages-example/*/manifest.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	// kustomize-root holds integers that come out of kustomize, where they used to be int.
	dirs := []string{"testdata/packages/kustomize-root", "testdata/packages/kustomize-dirs", "testdata/packages/pko"}
	for _, m := range examples {
		dirs = append(dirs, filepath.Dir(m))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), os.DirFS(dir), Options{Name: "x", Namespace: "clusters-demo", Environment: hostedEnv})
			require.NoError(t, err)
			n := 0
			for _, p := range res.Phases {
				for _, obj := range p.Objects {
					n++
					where, ok := jsonCompatible(obj.Object)
					assert.True(t, ok, "%s: not a JSON value at %s", describeObject(obj), where)
					require.NotPanics(t, func() {
						assert.Equal(t, obj, obj.DeepCopy())
					}, describeObject(obj))
				}
			}
			assert.Positive(t, n, "the package renders objects")
			where, ok := jsonCompatible(res.Config)
			assert.True(t, ok, "configuration not a JSON value at %s", where)
		})
	}
}

func TestValidateStructure(t *testing.T) {
	t.Parallel()
	const manifest = `apiVersion: pkgsync.dev/v1alpha1
kind: PackageManifest
metadata: {name: p}
spec:
  phases: [{name: one}]
  config:
    openAPIV3Schema:
      type: object
      required: [name]
      properties:
        name: {type: string}
        replicas: {type: integer, default: 1}
`
	const plain = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  annotations: {pkgsync.dev/phase: one}\n"
	const tmpl = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .config.name }}\n  annotations: {pkgsync.dev/phase: one}\n"
	tests := []struct {
		name   string
		files  map[string]string
		config string
		// wantErrs are substrings of the problems ValidateStructure reports, in order; none means valid.
		wantErrs []string
	}{{
		name:  "required value missing is not a structural problem",
		files: map[string]string{"plain.yaml": plain, "t.yaml.gotmpl": tmpl},
	}, {
		name:     "a complete configuration executes templates",
		files:    map[string]string{"t.yaml.gotmpl": "{{ .config.nothere }}"},
		config:   "name: x",
		wantErrs: []string{`has no key "nothere"`},
	}, {
		name:     "template syntax is checked without a configuration",
		files:    map[string]string{"t.yaml.gotmpl": "{{ if }}"},
		wantErrs: []string{"missing value for if"},
	}, {
		name:     "unknown phase in a plain file",
		files:    map[string]string{"plain.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: {pkgsync.dev/phase: two}\n", "t.yaml.gotmpl": tmpl},
		wantErrs: []string{`unknown phase "two"`},
	}, {
		name:     "a wrong value in a given configuration",
		files:    map[string]string{"plain.yaml": plain},
		config:   "replicas: many",
		wantErrs: []string{"invalid configuration: config.replicas"},
	}, {
		name:     "broken YAML",
		files:    map[string]string{"plain.yaml": "a: [\n"},
		wantErrs: []string{"invalid YAML"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{"manifest.yaml": {Data: []byte(manifest)}}
			for name, body := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(body)}
			}
			opts := Options{Config: []byte(tt.config)}
			err := ValidateStructure(t.Context(), fsys, opts)
			if tt.wantErrs == nil {
				require.NoError(t, err)
				var cfgErr *ConfigError
				require.ErrorAs(t, Validate(t.Context(), fsys, opts), &cfgErr, "Validate still wants the required value")
				assert.Equal(t, "config.name", cfgErr.Field)
				return
			}
			var problems Errors
			require.ErrorAs(t, err, &problems)
			require.Len(t, problems, len(tt.wantErrs), "problems: %v", err)
			for i, want := range tt.wantErrs {
				assert.ErrorContains(t, problems[i], want)
			}
			var cfgErr *ConfigError
			for _, p := range problems {
				if errors.As(p, &cfgErr) {
					assert.NotContains(t, cfgErr.Detail, "Required value", "missing values are let through")
				}
			}
		})
	}
}
