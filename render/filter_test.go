package render

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const filterDir = "testdata/packages/pko-filter"

func objectNames(t *testing.T, res *Result) []string {
	t.Helper()
	var names []string
	for _, p := range res.Phases {
		for _, o := range p.Objects {
			names = append(names, o.GetName())
		}
	}
	return names
}

func TestFilterSelectsObjectsAndFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		want   []string
	}{
		// Defaults: not HA, so the ha-* files, the HA object and the monitoring directory
		// (whose template would fail without .config.endpoint) are left out.
		{"defaults", ``, []string{"always", "simple-only"}},
		{"ha", `{"mode": "ha"}`, []string{"ha-extra", "always", "ha-only"}},
		{"ha-monitored", `{"mode": "ha", "monitoring": true, "endpoint": "http://x"}`, []string{"ha-extra", "monitoring", "always", "ha-only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), os.DirFS(filterDir), Options{Namespace: "apps", Config: []byte(tt.config), Environment: Environment{KubernetesVersion: "v1.36.3"}})
			require.NoError(t, err)
			assert.Equal(t, tt.want, objectNames(t, res))
			for _, p := range res.Phases {
				for _, o := range p.Objects {
					assert.NotContains(t, o.GetAnnotations(), conditionAnnotation, "the condition annotation is not applied")
				}
			}
		})
	}
}

func TestFilterConditionAnnotationKeepsOtherAnnotations(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), os.DirFS(filterDir), Options{Namespace: "apps", Environment: Environment{KubernetesVersion: "v1.36.3"}})
	require.NoError(t, err)
	objs := res.Phases[0].Objects
	require.Len(t, objs, 2)
	assert.Equal(t, map[string]string{"example.com/kept": "yes"}, objs[1].GetAnnotations())
	assert.NotContains(t, objs[0].Object["metadata"], "annotations", "an emptied annotation map is removed")
}

// filterPackage is a small package whose manifest filter and object condition are given.
func filterPackage(filter, condition string) fstest.MapFS {
	manifest := `apiVersion: manifests.package-operator.run/v1alpha1
kind: PackageManifest
metadata: {name: p}
spec:
  scopes: [Namespaced, Cluster]
  phases: [{name: deploy}]
  config:
    openAPIV3Schema:
      type: object
      required: [name]
      properties:
        name: {type: string}
        items: {type: array, items: {type: integer}}
` + filter
	obj := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    package-operator.run/phase: deploy\n"
	if condition != "" {
		obj += fmt.Sprintf("    package-operator.run/condition: %q\n", condition)
	}
	return fstest.MapFS{
		"manifest.yaml":   {Data: []byte(manifest)},
		"dir/object.yaml": {Data: []byte(obj)},
	}
}

func TestFilterErrorsNameFileObjectAndExpression(t *testing.T) {
	t.Parallel()
	items := make([]string, 300)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	bigConfig := `{"name": "x", "items": [` + strings.Join(items, ",") + `]}`
	tests := []struct {
		name      string
		filter    string
		condition string
		config    string
		want      []string
	}{
		{
			name: "annotation syntax", condition: `config.name ==`,
			want: []string{"dir/object.yaml:1 (document 1)", "metadata.annotations.package-operator.run/condition", "ConfigMap cm", `CEL expression "config.name =="`, "Syntax error"},
		},
		{
			name: "annotation not a bool", condition: `config.name`,
			want: []string{"dir/object.yaml", "ConfigMap cm", `CEL expression "config.name"`, "must return a bool, not string"},
		},
		{
			name: "annotation undeclared variable", condition: `self.x == 1`,
			want: []string{"dir/object.yaml", "ConfigMap cm", "undeclared reference to 'self'"},
		},
		{
			name: "annotation missing key", condition: `config.nothere == "a"`,
			want: []string{"dir/object.yaml", "ConfigMap cm", "no such key: nothere"},
		},
		{
			name: "annotation empty", condition: ` `,
			want: []string{"dir/object.yaml", "ConfigMap cm", "CEL expression"},
		},
		{
			name:   "condition bad name",
			filter: "  filter:\n    conditions: [{name: 1x, expression: 'true'}, {name: a, expression: 'true'}, {name: a, expression: 'true'}]\n",
			want:   []string{"manifest.yaml: spec.filter.conditions[0].name", "not a CEL identifier", "spec.filter.conditions[2].name: duplicate condition \"a\""},
		},
		{
			name:   "condition expression",
			filter: "  filter:\n    conditions: [{name: a, expression: 'config.name + 1'}]\n",
			want:   []string{"manifest.yaml: spec.filter.conditions[0].expression", `condition "a"`, `CEL expression "config.name + 1"`},
		},
		{
			name:   "condition uses a later condition",
			filter: "  filter:\n    conditions: [{name: a, expression: 'cond.b'}, {name: b, expression: 'true'}]\n",
			want:   []string{"spec.filter.conditions[0].expression", "no such key: b"},
		},
		{
			name:   "path glob and expression",
			filter: "  filter:\n    paths: [{glob: 'dir/[', expression: 'true'}, {glob: 'x', expression: '1'}]\n",
			want:   []string{"spec.filter.paths[0].glob", `"dir/[" is not a valid glob`, "spec.filter.paths[1].expression", "must return a bool"},
		},
		// Attacks: an expression that would run for long, or is huge, is stopped.
		{
			name:      "cost limit",
			condition: `config.items.all(a, config.items.all(b, config.items.all(c, a + b + c >= 0)))`,
			config:    bigConfig,
			want:      []string{"dir/object.yaml", "ConfigMap cm", "cost limit exceeded"},
		},
		{
			name:      "expression size",
			condition: strings.Repeat("true && ", 2000) + "true",
			want:      []string{"dir/object.yaml", "over the 10000 byte limit"},
		},
		{
			name:      "nesting",
			condition: strings.Repeat("(", 200) + "true" + strings.Repeat(")", 200),
			want:      []string{"dir/object.yaml", "ConfigMap cm", "CEL expression"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.config
			if cfg == "" {
				cfg = `{"name": "x"}`
			}
			_, err := Render(t.Context(), filterPackage(tt.filter, tt.condition), Options{Config: []byte(cfg)})
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// A build checks a package without the configuration it will get: expressions are compiled,
// so syntax errors show, but not evaluated, so nothing is left out and nothing fails for a
// value the configuration will provide.
func TestFilterValidateStructure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	filter := "  filter:\n    conditions: [{name: a, expression: 'config.name == \"x\"'}]\n    paths: [{glob: 'dir/**', expression: 'cond.a'}]\n"
	require.NoError(t, ValidateStructure(ctx, filterPackage(filter, `config.name == "y"`), Options{}))

	err := ValidateStructure(ctx, filterPackage(filter, `config.name ==`), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Syntax error")

	// The same package rendered with a configuration: the path filter leaves dir/ out.
	res, err := Render(ctx, filterPackage(filter, ""), Options{Config: []byte(`{"name": "y"}`)})
	require.NoError(t, err)
	assert.Empty(t, objectNames(t, res))
}
