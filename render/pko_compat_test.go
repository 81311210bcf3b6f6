package render

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pkoPackage is a Package Operator package with the phases and files given.
func pkoPackage(phases string, files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: " + phases + "\n")}}
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

// pkoManifestWith is a Package Operator manifest: the spec lines given, under a name.
func pkoManifestWith(spec string) fstest.MapFS {
	return fstest.MapFS{
		"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: p}\n" + spec)},
		"cm.yaml":       {Data: []byte(pkoConfigMap)},
	}
}

// Every rule of Package Operator's manifest validation, with its outcome there: refused.
// The spec of each case is otherwise valid.
func TestPackageOperatorManifestRules(t *testing.T) {
	t.Parallel()
	const ok = "spec:\n  scopes: [Namespaced]\n  phases: [{name: deploy}]\n"
	tests := []struct {
		name     string
		manifest string
		want     string
	}{
		{"scopes required", "spec:\n  phases: [{name: deploy}]\n", "manifest.yaml: spec.scopes: required"},
		{"scopes empty", "spec:\n  scopes: []\n  phases: [{name: deploy}]\n", "manifest.yaml: spec.scopes: required"},
		{"unknown scope", "spec:\n  scopes: [Everywhere]\n  phases: [{name: deploy}]\n", "manifest.yaml: spec.scopes[0]: must be Cluster or Namespaced"},
		{"phases required", "spec:\n  scopes: [Namespaced]\n", "manifest.yaml: spec.phases: required"},
		{"phase names unique", "spec:\n  scopes: [Namespaced]\n  phases: [{name: deploy}, {name: deploy}]\n", `manifest.yaml: spec.phases[1].name: duplicate phase "deploy"`},
		{"name required", "metadata: {}\n" + ok, "manifest.yaml: metadata.name: required"},
		{"probe needs probes", ok + "  availabilityProbes: [{selector: {kind: {group: apps, kind: Deployment}}, probes: []}]\n", "manifest.yaml: spec.availabilityProbes[0].probes: required"},
		{"image name required", ok + "  images: [{name: '', image: nginx}]\n", "manifest.yaml: spec.images[0].name: required"},
		{"image name unique", ok + "  images: [{name: a, image: nginx}, {name: a, image: nginx}]\n", `manifest.yaml: spec.images[1].name: duplicate image "a"`},
		{"image required", ok + "  images: [{name: a, image: ''}]\n", "manifest.yaml: spec.images[0].image: required"},
		{"platform version name", ok + "  constraints: [{platformVersion: {range: '>=1.30'}}]\n", "manifest.yaml: spec.constraints[0].platformVersion.name: must be Kubernetes or OpenShift"},
		{"platform version range", ok + "  constraints: [{platformVersion: {name: Kubernetes, range: 'soon'}}]\n", "manifest.yaml: spec.constraints[0].platformVersion.range: invalid version range"},
		{"schema nullable at the root", ok + "  config: {openAPIV3Schema: {type: object, nullable: true}}\n", "manifest.yaml: spec.config.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"},
		{"schema not structural", ok + "  config: {openAPIV3Schema: {type: object, properties: {a: {}}}}\n", "manifest.yaml: spec.config.openAPIV3Schema.properties[a].type: Required value"},
		{"schema default not pruned", ok + "  config: {openAPIV3Schema: {type: object, properties: {a: {type: object, default: {b: 1}}}}}\n", "manifest.yaml: spec.config.openAPIV3Schema.properties[a].default: Invalid value"},
		{"test case name", ok + "test:\n  template: [{name: 'a/b'}]\n", `manifest.yaml: test.template[0].name: "a/b": a case name is a directory name`},
		{"test case config against the schema", ok + "  config: {openAPIV3Schema: {type: object, properties: {replicas: {type: integer}}}}\ntest:\n  template: [{name: a, context: {config: {replicas: many}}}]\n", "manifest.yaml: test.template[0].context.config.replicas: Invalid value"},
		{"test case config before defaults", ok + "  config: {openAPIV3Schema: {type: object, required: [replicas], properties: {replicas: {type: integer, default: 1}}}}\ntest:\n  template: [{name: a}]\n", "manifest.yaml: test.template[0].context.config.replicas: Required value"},
		{"kubeconform needs a version", ok + "test:\n  kubeconform: {schemaLocations: [x]}\n", "manifest.yaml: test.kubeconform.kubernetesVersion: required"},
		{"unknown field", ok + "  phase: [{name: deploy}]\n", `manifest.yaml: decode manifest: json: unknown field "phase"`},
		{"unknown test field", ok + "test:\n  templates: []\n", `manifest.yaml: decode manifest: json: unknown field "templates"`},
		{"unknown top-level field", ok + "status: {}\n", `manifest.yaml: decode manifest: json: unknown field "status"`},
		{"dependencies", ok + "  dependencies: [{image: {name: a, package: a.repo, range: '>=1'}}]\n", "manifest.yaml: spec.dependencies: not supported"},
		{"repositories", ok + "  repositories: [{image: quay.io/r:1}]\n", "manifest.yaml: spec.repositories: not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := pkoManifestWith(tt.manifest)
			if strings.HasPrefix(tt.manifest, "metadata") {
				fsys["manifest.yaml"].Data = []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\n" + tt.manifest)
			}
			_, err := Render(t.Context(), fsys, Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Error(t, ValidateStructure(t.Context(), fsys, Options{}), "a build refuses it too")
		})
	}
}

// A manifest using every field of Package Operator's type is read.
func TestPackageOperatorManifestEveryField(t *testing.T) {
	t.Parallel()
	fsys := pkoManifestWith(`spec:
  scopes: [Namespaced, Cluster]
  phases: [{name: deploy, class: default}]
  availabilityProbes:
  - selector: {kind: {group: "", kind: ConfigMap}, selector: {matchLabels: {a: b}}}
    probes:
    - condition: {type: Available, status: "True"}
    - fieldsEqual: {fieldA: .a, fieldB: .b}
    - cel: {rule: "true", message: m}
  config: {openAPIV3Schema: {type: object, properties: {replicas: {type: integer, default: 1}}}}
  images: []
  filter:
    conditions: [{name: always, expression: "true"}]
    paths: [{glob: "nothing/**", expression: cond.always}]
  constraints:
  - platform: [Kubernetes]
  - platformVersion: {name: Kubernetes, range: ">=1.20"}
  - uniqueInScope: {}
test:
  template:
  - name: .all_fields-1
    context:
      package: {metadata: {name: p, namespace: ns, labels: {a: b}, annotations: {c: d}}, image: quay.io/p:1}
      config: {replicas: 2}
      environment:
        kubernetes: {version: v1.30.0}
        openShift: {version: v4.15.0, managed: {data: {a: b}}}
        proxy: {httpProxy: h, httpsProxy: s, noProxy: n}
        hyperShift:
          hostedCluster:
            metadata: {name: hc, namespace: clusters, labels: {}, annotations: {}}
            hostedClusterNamespace: clusters-hc
            nodeSelector: {a: b}
  kubeconform:
    kubernetesVersion: v1.30.0
    schemaLocations: [somewhere]
`)
	_, err := Render(t.Context(), fsys, Options{Environment: Environment{KubernetesVersion: "v1.30.0"}})
	require.NoError(t, err)
	tests, err := ReadTemplateTests(fsys)
	require.NoError(t, err)
	require.Len(t, tests.Cases, 1)
	assert.Equal(t, ".all_fields-1", tests.Cases[0].Name)
}

// Package Operator's object validation: labels must be valid label keys and values, on every
// object, even one a condition leaves out.
func TestPackageOperatorObjectLabelsAreValidated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, labels, want string
	}{
		{"value with a space", "{app: 'not valid'}", `cm.yaml:1 (document 1): metadata.labels: ConfigMap cm: Invalid value: "not valid"`},
		{"value too long", "{app: " + strings.Repeat("a", 64) + "}", "must be no more than 63 bytes"},
		{"key not qualified", "{'-bad': x}", `metadata.labels: ConfigMap cm: Invalid value: "-bad"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj := strings.Replace(pkoConfigMap, "  name: cm\n", "  name: cm\n  labels: "+tt.labels+"\n", 1)
			_, err := Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{"cm.yaml": obj}), Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			_, err = Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{"cm.yaml": obj + "    package-operator.run/condition: 'false'\n"}), Options{})
			require.Error(t, err, "refused even when left out")
		})
	}
	valid := strings.Replace(pkoConfigMap, "  name: cm\n", "  name: cm\n  labels: {app.kubernetes.io/name: x, empty: ''}\n", 1)
	_, err := Render(t.Context(), pkoPackage("[{name: deploy}]", map[string]string{"cm.yaml": valid}), Options{})
	require.NoError(t, err)
}

// The rest of Package Operator's object validation: group-version-kind, phase annotation,
// duplicates. Each is refused, as there.
func TestPackageOperatorObjectRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no apiVersion", map[string]string{"a.yaml": strings.Replace(pkoConfigMap, "apiVersion: v1\n", "", 1)}, "a.yaml:1 (document 1): apiVersion: required"},
		{"no kind", map[string]string{"a.yaml": strings.Replace(pkoConfigMap, "kind: ConfigMap\n", "", 1)}, "a.yaml:1 (document 1): kind: required"},
		{"no phase annotation", map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"}, "a.yaml:1 (document 1): metadata.annotations: ConfigMap cm: missing phase: add the annotation package-operator.run/phase with one of the manifest's phases (deploy)"},
		{"unknown phase", map[string]string{"a.yaml": strings.Replace(pkoConfigMap, "phase: deploy", "phase: later", 1)}, `ConfigMap cm: unknown phase "later"`},
		{"duplicate across files", map[string]string{"a.yaml": pkoConfigMap, "b.yaml": strings.Replace(pkoConfigMap, "apiVersion: v1", "apiVersion: v2", 1)}, "b.yaml:1 (document 1): metadata.name: ConfigMap cm: duplicate object, already defined in a.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(t.Context(), pkoPackage("[{name: deploy}]", tt.files), Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
