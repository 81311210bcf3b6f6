package render

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// pkoManifest is Package Operator's PackageManifest with every field its type has
// (package-operator.run/apis, manifests/v1alpha1), so that a Package Operator manifest is
// decoded strictly: a field its type does not have is refused by name, as pkgsync's own format
// is. The fields pkgsync shares with it are pkgsync's; test is read by ReadTemplateTests;
// repositories and dependencies are decoded only to be refused.
type pkoManifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec pkoManifestSpec `json:"spec,omitempty"`
	Test pkoManifestTest `json:"test,omitempty"`
}

type pkoManifestSpec struct {
	v1alpha1.PackageManifestSpec `json:",inline"`

	Repositories []struct {
		File  string `json:"file,omitempty"`
		Image string `json:"image,omitempty"`
	} `json:"repositories,omitempty"`
	Dependencies []struct {
		Image *struct {
			Name    string `json:"name"`
			Package string `json:"package"`
			Range   string `json:"range"`
		} `json:"image,omitempty"`
	} `json:"dependencies,omitempty"`
}

// pkoManifestTest is the test section: template test cases and kubeconform settings.
type pkoManifestTest struct {
	Template    []pkoTestCase   `json:"template,omitempty"`
	Kubeconform *pkoKubeconform `json:"kubeconform,omitempty"`
}

// pkoKubeconform is test.kubeconform: the Kubernetes release and the schema locations
// Package Operator's tooling validates rendered objects against.
type pkoKubeconform struct {
	KubernetesVersion string   `json:"kubernetesVersion"`
	SchemaLocations   []string `json:"schemaLocations,omitempty"`
}

type pkoTestCase struct {
	Name    string `json:"name"`
	Context struct {
		Package struct {
			Metadata pkoObjectMeta `json:"metadata"`
			Image    string        `json:"image"`
		} `json:"package"`
		Config      json.RawMessage `json:"config,omitempty"`
		Environment pkoEnvironment  `json:"environment"`
	} `json:"context,omitempty"`
}

// pkoEnvironment is Package Operator's environment (its manifests.PackageEnvironment), field
// by field with the same JSON names and omitempty rules: test cases are decoded into it, and
// Package Operator packages' templates see it as it encodes to JSON.
type pkoEnvironment struct {
	Kubernetes pkoKubernetes  `json:"kubernetes"`
	OpenShift  *pkoOpenShift  `json:"openShift,omitempty"`
	Proxy      *pkoProxy      `json:"proxy,omitempty"`
	HyperShift *pkoHyperShift `json:"hyperShift,omitempty"`
}

type pkoKubernetes struct {
	Version string `json:"version"`
}

type pkoOpenShift struct {
	Version string               `json:"version"`
	Managed *pkoManagedOpenShift `json:"managed,omitempty"`
}

type pkoManagedOpenShift struct {
	Data map[string]string `json:"data"`
}

type pkoProxy struct {
	HTTPProxy  string `json:"httpProxy,omitempty"`
	HTTPSProxy string `json:"httpsProxy,omitempty"`
	NoProxy    string `json:"noProxy,omitempty"`
}

type pkoHyperShift struct {
	HostedCluster *pkoHostedCluster `json:"hostedCluster"`
}

type pkoHostedCluster struct {
	Metadata               pkoObjectMeta     `json:"metadata"`
	HostedClusterNamespace string            `json:"hostedClusterNamespace"`
	NodeSelector           map[string]string `json:"nodeSelector,omitempty"`
}

// pkoObjectMeta is the simplified object metadata of Package Operator's template context.
type pkoObjectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}
