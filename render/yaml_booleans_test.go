package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sigs.k8s.io/yaml, like kubectl, reads YAML 1.1: on, off, y, n, yes and no are booleans. A
// field that must be a string and holds one is an error that says so, at its line, rather than
// "required" or an object in the wrong namespace.
func TestObjectFieldsThatReadAsBooleans(t *testing.T) {
	t.Parallel()
	const manifest = "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  phases: [{name: one}]\n"
	tests := []struct {
		name  string
		doc   string
		line  int
		field string
		want  string
	}{{
		name:  "name on",
		doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: on\n",
		line:  8,
		field: "metadata.name",
		want:  `objects.yaml:8 (document 2): metadata.name: is the boolean true (YAML 1.1 reads on/off/y/n/yes/no as booleans): quote it, "on"`,
	}, {
		name:  "namespace n",
		doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: n\n",
		line:  9,
		field: "metadata.namespace",
		want:  `metadata.namespace: is the boolean false (YAML 1.1 reads on/off/y/n/yes/no as booleans): quote it, "n"`,
	}, {
		name:  "label value yes",
		doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app.kubernetes.io/enabled: yes\n",
		line:  10,
		field: "metadata.labels.app.kubernetes.io/enabled",
		want:  `is the boolean true (YAML 1.1 reads on/off/y/n/yes/no as booleans): quote it, "yes"`,
	}, {
		name:  "annotation value off",
		doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: {x: off}\n",
		line:  9,
		field: "metadata.annotations.x",
		want:  `is the boolean false (YAML 1.1 reads on/off/y/n/yes/no as booleans): quote it, "off"`,
	}, {
		name:  "kind Y",
		doc:   "apiVersion: v1\nkind: Y\nmetadata: {name: a}\n",
		line:  6,
		field: "kind",
		want:  `kind: is the boolean true (YAML 1.1 reads on/off/y/n/yes/no as booleans): quote it, "Y"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{
				"manifest.yaml": {Data: []byte(manifest)},
				"objects.yaml":  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first, annotations: {pkgsync.dev/phase: one}}\n---\n" + tt.doc)},
			}
			_, err := Render(t.Context(), fsys, Options{})
			require.Error(t, err)
			var problems Errors
			require.ErrorAs(t, err, &problems)
			require.Len(t, problems, 1, err.Error())
			var perr *Error
			require.ErrorAs(t, problems[0], &perr)
			assert.Equal(t, tt.line, perr.Line, "the line in the file: the first document has 4")
			assert.Equal(t, tt.field, perr.Field)
			assert.Contains(t, perr.Error(), tt.want)
			var berr *BooleanError
			assert.ErrorAs(t, perr, &berr, "convert refuses with the same error")
		})
	}
}
