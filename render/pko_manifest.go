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
	Template    []pkoTestCase `json:"template,omitempty"`
	Kubeconform *struct {
		KubernetesVersion string   `json:"kubernetesVersion"`
		SchemaLocations   []string `json:"schemaLocations,omitempty"`
	} `json:"kubeconform,omitempty"`
}

type pkoTestCase struct {
	Name    string `json:"name"`
	Context struct {
		Package struct {
			Metadata pkoObjectMeta `json:"metadata"`
			Image    string        `json:"image"`
		} `json:"package"`
		Config      json.RawMessage `json:"config,omitempty"`
		Environment struct {
			Kubernetes struct {
				Version string `json:"version"`
			} `json:"kubernetes"`
			OpenShift *struct {
				Version string `json:"version"`
				Managed *struct {
					Data map[string]string `json:"data"`
				} `json:"managed,omitempty"`
			} `json:"openShift,omitempty"`
			Proxy *struct {
				HTTPProxy  string `json:"httpProxy,omitempty"`
				HTTPSProxy string `json:"httpsProxy,omitempty"`
				NoProxy    string `json:"noProxy,omitempty"`
			} `json:"proxy,omitempty"`
			HyperShift *struct {
				HostedCluster *struct {
					Metadata               pkoObjectMeta     `json:"metadata"`
					HostedClusterNamespace string            `json:"hostedClusterNamespace"`
					NodeSelector           map[string]string `json:"nodeSelector,omitempty"`
				} `json:"hostedCluster"`
			} `json:"hyperShift,omitempty"`
		} `json:"environment"`
	} `json:"context,omitempty"`
}

// pkoObjectMeta is the simplified object metadata of Package Operator's template context.
type pkoObjectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}
