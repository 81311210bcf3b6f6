package render

import (
	"errors"
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const environmentPkg = "testdata/packages/pko-environment"

// fullEnv is a hosted-control-plane namespace on OpenShift behind a proxy, with a labelled
// HostedCluster.
var fullEnv = Environment{
	KubernetesVersion: "v1.36.3",
	OpenShiftVersion:  "4.21.2",
	Proxy:             &Proxy{HTTPProxy: "http://proxy:3128", HTTPSProxy: "http://proxy:3129", NoProxy: ".cluster.local"},
	HostedCluster: &HostedCluster{
		Name: "demo", Namespace: "clusters", HostedClusterNamespace: "clusters-demo",
		Labels:       map[string]string{"example.com/team": "payments"},
		Annotations:  map[string]string{"example.com/owner": "alice"},
		NodeSelector: map[string]string{"node-role.kubernetes.io/infra": ""},
	},
}

func TestEnvironmentTemplateContext(t *testing.T) {
	t.Parallel()
	res, err := Render(t.Context(), os.DirFS(environmentPkg), Options{Namespace: "clusters-demo", Environment: fullEnv})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"kubernetes":    "v1.36.3",
		"openShift":     "4.21.2",
		"proxy":         "http://proxy:3128 http://proxy:3129 .cluster.local",
		"hostedCluster": "demo/clusters in clusters-demo",
		"team":          "payments",
		"owner":         "alice",
		"nodeSelector":  `{"node-role.kubernetes.io/infra":""}`,
	}, res.Phases[0].Objects[0].Object["data"])

	// Not OpenShift, no proxy: the keys are absent, as in Package Operator.
	env := fullEnv
	env.OpenShiftVersion, env.Proxy = "", nil
	res, err = Render(t.Context(), os.DirFS(environmentPkg), Options{Namespace: "clusters-demo", Environment: env})
	require.NoError(t, err)
	data := res.Phases[0].Objects[0].Object["data"].(map[string]any)
	assert.Equal(t, "none", data["openShift"])
	assert.Equal(t, "none", data["proxy"])
}

func TestConstraints(t *testing.T) {
	t.Parallel()
	manifest := func(constraints string) fstest.MapFS {
		return fstest.MapFS{
			"manifest.yaml": {Data: []byte("apiVersion: manifests.package-operator.run/v1alpha1\nkind: PackageManifest\nmetadata: {name: c}\nspec:\n  scopes: [Namespaced, Cluster]\n  phases: [{name: deploy}]\n  constraints:\n" + constraints)},
			"cm.yaml":       {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations: {package-operator.run/phase: deploy}\n")},
		}
	}
	k8s := Environment{KubernetesVersion: "v1.29.7+k3s1"}
	ocp := Environment{KubernetesVersion: "v1.33.2", OpenShiftVersion: "4.20.0-rc.1"}
	tests := []struct {
		name        string
		constraints string
		env         Environment
		violated    string // constraint kind, "" when met
		want        string
	}{
		{"kubernetes on kubernetes", "  - platform: [Kubernetes]\n", k8s, "", ""},
		{"kubernetes on openshift", "  - platform: [Kubernetes]\n", ocp, "", ""},
		{"openshift only", "  - platform: [OpenShift]\n", k8s, ConstraintPlatform, "constraint spec.constraints[0].platform not met: the package runs on OpenShift, the cluster is Kubernetes"},
		{"version too old", "  - platform: [Kubernetes]\n  - platformVersion: {name: Kubernetes, range: '>=1.30'}\n", k8s, ConstraintPlatformVersion,
			"constraint spec.constraints[1].platformVersion not met: the package needs Kubernetes >=1.30, the cluster runs v1.29.7+k3s1"},
		{"version in range", "  - platformVersion: {name: Kubernetes, range: '>=1.29 <1.30'}\n", k8s, "", ""},
		{"openshift version", "  - platformVersion: {name: OpenShift, range: '>=4.20'}\n", ocp, "", ""},
		{"openshift version on kubernetes", "  - platformVersion: {name: OpenShift, range: '>=4.14'}\n", k8s, ConstraintPlatformVersion, "the cluster is not OpenShift"},
		{"openshift too old", "  - platformVersion: {name: OpenShift, range: '>=4.21'}\n", ocp, ConstraintPlatformVersion, "needs OpenShift >=4.21, the cluster runs 4.20.0-rc.1"},
		{"unknown kubernetes version is not checked", "  - platformVersion: {name: Kubernetes, range: '>=9'}\n", Environment{}, "", ""},
		{"uniqueInScope is the caller's", "  - uniqueInScope: {}\n", k8s, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Render(t.Context(), manifest(tt.constraints), Options{Environment: tt.env})
			if tt.violated == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Nil(t, res, "nothing is rendered")
			var ce *ConstraintError
			require.True(t, errors.As(err, &ce), "%T: %v", err, err)
			assert.Equal(t, tt.violated, ce.Constraint)
			assert.Contains(t, err.Error(), tt.want)
			// A build has no cluster: it checks the constraints' form only.
			assert.NoError(t, ValidateStructure(t.Context(), manifest(tt.constraints), Options{}))
		})
	}

	bad := map[string]string{
		"  - platform: [Windows]\n":                                `spec.constraints[0].platform[0]: must be Kubernetes or OpenShift, not "Windows"`,
		"  - platformVersion: {name: Kubernetes, range: 'soon'}\n": `spec.constraints[0].platformVersion.range: invalid version range "soon"`,
		"  - {platform: [Kubernetes], uniqueInScope: {}}\n":        "spec.constraints[0]: exactly one of platform, platformVersion or uniqueInScope must be set",
		"  - {}\n": "spec.constraints[0]: exactly one of",
		"  - platformVersion: {name: Kubernetes, range: '>=1'}\n  - platform: []\n": "spec.constraints[1].platform: required",
	}
	for constraints, want := range bad {
		_, err := Render(t.Context(), manifest(constraints), Options{Environment: k8s})
		require.Error(t, err, constraints)
		assert.Contains(t, err.Error(), "manifest.yaml: "+want)
		assert.Error(t, ValidateStructure(t.Context(), manifest(constraints), Options{}), "a build checks their form")
	}
}
