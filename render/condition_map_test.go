package render

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/desired"
)

// conditionMapPackage is a Package Operator package whose second object carries the
// condition-map annotation given.
func conditionMapPackage(mapping string) fstest.MapFS {
	obj := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n  annotations: {package-operator.run/phase: deploy}\n---\n" +
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  annotations:\n    package-operator.run/phase: deploy\n    example.com/kept: 'yes'\n" +
		"    package-operator.run/condition-map: |-\n" + indentLines(mapping, "      ") + "\n"
	return fstest.MapFS{
		"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: r}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n")},
		"objects.yaml":  {Data: []byte(obj)},
	}
}

// package-operator.run/condition-map names conditions of an object to copy into the status of
// the Package under another type, one "Source => prefix/Destination" per line, as Package
// Operator does. The annotation is not applied.
func TestConditionMapAnnotation(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), conditionMapPackage("Available => my-prefix.io/Available\n  Progressing=>my-prefix.io/Rolling  \n"), Options{})
	require.NoError(t, err)
	ph := res.Phases[0]
	require.Len(t, ph.Objects, 2)
	assert.Equal(t, map[string]string{"example.com/kept": "yes"}, ph.Objects[1].GetAnnotations(), "the annotation is not applied")
	assert.Equal(t, []desired.ConditionMapping{
		{Object: 1, Source: "Available", Destination: "my-prefix.io/Available"},
		{Object: 1, Source: "Progressing", Destination: "my-prefix.io/Rolling"},
	}, ph.ConditionMappings)
}

func TestConditionMapAnnotationErrors(t *testing.T) {
	t.Parallel()
	field := "objects.yaml:7 (document 2): metadata.annotations.package-operator.run/condition-map: Deployment app: "
	tests := []struct {
		name, mapping, want string
	}{
		{"one part", "Available", "line 1: want SOURCE => DESTINATION"},
		{"empty source", "=> a.io/B", "line 1: the source condition type is empty"},
		{"empty destination", "Available =>", "line 1: the destination condition type is empty"},
		{"destination without prefix", "Available => Available", `line 1: destination "Available" needs a domain prefix (example.com/Available)`},
		{"bad destination prefix", "Available => Not_A_Domain/Available", `line 1: destination "Not_A_Domain/Available" needs a domain prefix`},
		{"bad source", "Avail able => a.io/B", `line 1: source "Avail able" is not a condition type`},
		{"second line", "Available => a.io/A\nReady", "line 2: want SOURCE => DESTINATION"},
		{"empty", "", "line 1: want SOURCE => DESTINATION"},
		{"too many lines", strings.Repeat("Available => a.io/A\n", 65), "65 lines, over 64 mappings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(t.Context(), conditionMapPackage(tt.mapping), Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), field+tt.want)
		})
	}
}

// Package Operator checks nothing about destinations beyond each line's shape: two objects of
// one package (the frontend and backend Packages of a root component, in its own test data)
// may map the same destination, and so may two lines of one object; the owner then shows the
// one written last. Two lines with the same source keep the last line's destination, as Package
// Operator's map from source to destination does.
func TestConditionMapDestinationsAsPackageOperator(t *testing.T) {
	t.Parallel()
	fsys := conditionMapPackage("Available => a.io/Available\nReady => a.io/Available\nProgressing => a.io/First\nProgressing => a.io/Progressing")
	fsys["more.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n  annotations:\n    package-operator.run/phase: deploy\n    package-operator.run/condition-map: 'Ready => a.io/Available'\n")}
	res, err := Render(t.Context(), fsys, Options{})
	require.NoError(t, err)
	ph := res.Phases[0]
	require.Len(t, ph.Objects, 3)
	assert.Equal(t, []desired.ConditionMapping{
		{Object: 0, Source: "Ready", Destination: "a.io/Available"}, // more.yaml comes first
		{Object: 2, Source: "Available", Destination: "a.io/Available"},
		{Object: 2, Source: "Ready", Destination: "a.io/Available"},
		{Object: 2, Source: "Progressing", Destination: "a.io/Progressing"},
	}, ph.ConditionMappings)
}
