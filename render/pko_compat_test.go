package render

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pkoPackage is a Package Operator package with the phases and files given.
func pkoPackage(phases string, files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  phases: " + phases + "\n")}}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

const pkoConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    package-operator.run/phase: deploy\n"

// Package Operator's class "default" is its built-in controller: the management cluster.
func TestPackageOperatorDefaultPhaseClass(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), pkoPackage("[{name: deploy, class: default}]", map[string]string{"cm.yaml": pkoConfigMap}), Options{})
	require.NoError(t, err)
	assert.Empty(t, res.Phases[0].Class)
}

// An object Package Operator only observes (package-operator.run/external) would be written
// by pkgsync, which applies every object it renders: refused rather than taken over.
func TestPackageOperatorExternalObjectsAreRefused(t *testing.T) {
	t.Parallel()
	_, err := Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{"cm.yaml": pkoConfigMap + "    package-operator.run/external: \"True\"\n"}), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `cm.yaml:1 (document 1): metadata.annotations.package-operator.run/external: ConfigMap cm: not supported: pkgsync applies every object of a package`)
}

// package-operator.run/collision-protection is applied as a plain annotation: pkgsync's own
// rule (the Package's adoptionPolicy) decides whether an existing object may be taken over.
func TestPackageOperatorCollisionProtectionIsAppliedAsIs(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{"cm.yaml": pkoConfigMap + "    package-operator.run/collision-protection: IfNoController\n"}), Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"package-operator.run/collision-protection": "IfNoController"}, res.Phases[0].Objects[0].GetAnnotations())
}

// Package Operator's getFile, getFileGlob and b64decMap read the package's own files.
func TestPackageOperatorFileFunctions(t *testing.T) {
	t.Parallel()
	tmpl := pkoConfigMap + `data:
  one: {{ getFile "files/one.txt" | quote }}
  helper: {{ getFile "_helpers.tpl" | quote }}
  globbed: {{ keys (getFileGlob "files/**/*.txt") | sortAlpha | join "," | quote }}
  decoded: {{ (b64decMap (dict "a" "aGVsbG8=" "n" 1)).a | quote }}
`
	files := map[string]string{"cm.yaml.gotmpl": tmpl, "files/one.txt": "1", "files/sub/two.txt": "2", "files/three.md": "3", "_helpers.tpl": "h"}
	res, err := Render(t.Context(), pkoPackage("[{name: deploy}]", files), Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"one": "1", "helper": "h", "globbed": "files/one.txt,files/sub/two.txt", "decoded": "hello"}, res.Phases[0].Objects[0].Object["data"])
}

func TestPackageOperatorFileFunctionErrors(t *testing.T) {
	t.Parallel()
	for call, want := range map[string]string{
		`getFile "nothere.txt"`:         `getFile "nothere.txt": no such file in the package`,
		`getFile "../../etc/passwd"`:    `no such file in the package`,
		`getFileGlob "files/["`:         `getFileGlob "files/[": not a valid glob`,
		`b64decMap (dict "a" "%%%")`:    `b64decMap: key "a": illegal base64 data`,
		`getFile "manifest.yaml"`:       `no such file in the package`,
		`getFile ".hidden/secret.yaml"`: `no such file in the package`,
	} {
		files := map[string]string{"cm.yaml.gotmpl": pkoConfigMap + "data: {x: '{{ " + call + " }}'}\n", ".hidden/secret.yaml": "s"}
		_, err := Render(t.Context(), pkoPackage("[{name: deploy}]", files), Options{})
		require.Error(t, err, call)
		assert.Contains(t, err.Error(), "cm.yaml.gotmpl:7: template", call)
		assert.Contains(t, err.Error(), want, call)
	}
}

// .environment.openShift has no managed key (Package Operator's managed OpenShift data).
func TestPackageOperatorManagedOpenShiftIsAbsent(t *testing.T) {
	t.Parallel()
	tmpl := pkoConfigMap + "data: {managed: '{{ hasKey .environment.openShift \"managed\" }}'}\n"
	res, err := Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{"cm.yaml.gotmpl": tmpl}), Options{Environment: Environment{OpenShiftVersion: "4.18.2"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"managed": "false"}, res.Phases[0].Objects[0].Object["data"])
}
