package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// pkoResources are Package Operator resources as its users write them, one of each kind
// convert takes.
const pkoResources = `apiVersion: package-operator.run/v1alpha1
kind: Package
metadata: {name: shop, namespace: apps, labels: {team: a}}
spec:
  image: quay.io/example/shop-package:v1
  component: backend
  config: {replicas: 2}
---
apiVersion: package-operator.run/v1alpha1
kind: ClusterPackage
metadata: {name: shop}
spec:
  image: quay.io/example/shop-package:v1
---
apiVersion: package-operator.run/v1alpha1
kind: ObjectDeployment
metadata: {name: od, namespace: apps}
spec:
  revisionHistoryLimit: 10
  selector: {matchLabels: {app: od}}
  template:
    metadata: {labels: {app: od}}
    spec:
      availabilityProbes:
      - selector: {kind: {group: apps, kind: Deployment}}
        probes: [{condition: {type: Available, status: "True"}}]
      phases:
      - name: deploy
        class: default
        objects:
        - object: {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}
          conditionMappings: [{sourceType: Available, destinationType: a.io/Available}]
        externalObjects:
        - object: {apiVersion: v1, kind: ConfigMap, metadata: {name: observed}}
---
apiVersion: package-operator.run/v1alpha1
kind: HostedClusterPackage
metadata: {name: addon}
spec:
  hostedClusterSelector: {matchLabels: {env: prod}}
  strategy:
    rollingUpgrade: {maxUnavailable: 2}
  partition:
    labelKey: risk-group
    order: {static: [canary, "*"]}
  template:
    metadata: {labels: {team: a}}
    spec:
      image: quay.io/example/addon-package:v1
      config: {debug: false}
`

func TestConvertPackageOperatorResources(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "pko.yaml")
	require.NoError(t, os.WriteFile(file, []byte(pkoResources), 0o644))
	stdout, stderr, err := runCLI(t, "convert", file)
	require.NoError(t, err, stderr)

	// The output is pkgsync's own resources, each decoded strictly by its Go type.
	docs := strings.Split(strings.TrimPrefix(stdout, "---\n"), "---\n")
	require.Len(t, docs, 4)
	var pkg v1alpha1.Package
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &pkg))
	assert.Equal(t, "pkgsync.dev/v1alpha1", pkg.APIVersion)
	assert.Equal(t, "apps", pkg.Namespace)
	assert.Equal(t, map[string]string{"team": "a"}, pkg.Labels)
	assert.Equal(t, "quay.io/example/shop-package:v1", pkg.Spec.Image)
	assert.Equal(t, "backend", pkg.Spec.Component)
	assert.JSONEq(t, `{"replicas": 2}`, string(pkg.Spec.Config.Raw))

	var cpkg v1alpha1.ClusterPackage
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &cpkg))
	assert.Equal(t, "ClusterPackage", cpkg.Kind)

	var od v1alpha1.ObjectDeployment
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &od))
	require.Len(t, od.Spec.Template.Spec.Phases, 1)
	ph := od.Spec.Template.Spec.Phases[0]
	assert.Equal(t, "deploy", ph.Name)
	assert.Empty(t, ph.Class, "Package Operator's default class is the management cluster")
	require.Len(t, ph.Objects, 1, "observed objects are not applied")
	assert.JSONEq(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`, string(ph.Objects[0].Object.Raw))
	require.Len(t, od.Spec.Template.Spec.AvailabilityProbes, 1)

	var hcpkg v1alpha1.HostedClusterPackage
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[3]), &hcpkg))
	assert.Equal(t, map[string]string{"env": "prod"}, hcpkg.Spec.HostedClusterSelector.MatchLabels)
	assert.Equal(t, "quay.io/example/addon-package:v1", hcpkg.Spec.Template.Spec.Image)
	assert.Equal(t, map[string]string{"team": "a"}, hcpkg.Spec.Template.Metadata.Labels)
	assert.Equal(t, "2", hcpkg.Spec.Rollout.MaxUnavailable.String())
	require.NotNil(t, hcpkg.Spec.Rollout.Partitions)
	assert.Equal(t, "risk-group", hcpkg.Spec.Rollout.Partitions.LabelKey)
	assert.Equal(t, []string{"canary", "*"}, hcpkg.Spec.Rollout.Partitions.Order.Static)

	// What has no equivalent is named, with what to do instead.
	for _, want := range []string{
		file + " (document 3): ObjectDeployment apps/od: spec.revisionHistoryLimit: no equivalent",
		"ObjectDeployment apps/od: spec.selector: no equivalent",
		"ObjectDeployment apps/od: spec.template.metadata: no equivalent",
		"ObjectDeployment apps/od: spec.template.spec.phases[0].externalObjects: no equivalent: pkgsync applies every object",
		"ObjectDeployment apps/od: spec.template.spec.phases[0].objects[0].conditionMappings: no equivalent",
	} {
		assert.Contains(t, stderr, want)
	}
	assert.NotContains(t, stderr, "Package apps/shop", "a Package converts entirely")
}

func TestConvertReadsStdinAndRefusesOtherKinds(t *testing.T) {
	t.Parallel()
	cmd := newRootCmd()
	var stdout, stderr strings.Builder
	cmd.SetArgs([]string{"convert"})
	cmd.SetIn(strings.NewReader("apiVersion: package-operator.run/v1alpha1\nkind: Package\nmetadata: {name: p, namespace: apps}\nspec: {image: quay.io/p:1, paused: true}\n"))
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetContext(t.Context())
	require.NoError(t, cmd.Execute())
	assert.Contains(t, stdout.String(), "kind: Package\nmetadata:\n  name: p\n  namespace: apps\nspec:\n  image: quay.io/p:1\n")
	assert.Contains(t, stderr.String(), "- (document 1): Package apps/p: spec.paused: no equivalent")

	file := filepath.Join(t.TempDir(), "other.yaml")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644))
	_, _, err := runCLI(t, "convert", file)
	require.Error(t, err)
	assert.ErrorContains(t, err, "v1 ConfigMap is not a Package Operator resource")
}

// A name, namespace, label or annotation written y, n, on, off, yes or no is a boolean to
// kubectl and to Package Operator (YAML 1.1): convert refuses it, naming the field and the fix,
// rather than printing `namespace: true` or guessing which string was meant.
func TestConvertRefusesYAML11Booleans(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "package.yaml")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: package-operator.run/v1alpha1\nkind: Package\nmetadata: {name: p, namespace: ok}\nspec: {image: quay.io/p:1}\n---\n"+
		"apiVersion: package-operator.run/v1alpha1\nkind: Package\nmetadata: {name: p, namespace: y}\nspec: {image: quay.io/p:1}\n"), 0o600))
	out, _, err := runCLI(t, "convert", file)
	assert.Equal(t, 1, exitCodeOf(err))
	assert.EqualError(t, err, "convert "+file+" (document 2): metadata.namespace: is the boolean true (YAML 1.1 reads on/off/y/n/yes/no as booleans): quote it")
	assert.NotContains(t, out, "namespace: true")

	require.NoError(t, os.WriteFile(file, []byte("apiVersion: package-operator.run/v1alpha1\nkind: Package\nmetadata: {name: p, namespace: \"y\"}\nspec: {image: quay.io/p:1}\n"), 0o600))
	out, _, err = runCLI(t, "convert", file)
	require.NoError(t, err)
	assert.Contains(t, out, "namespace: \"y\"", "a quoted string stays one, and is written quoted")
}
