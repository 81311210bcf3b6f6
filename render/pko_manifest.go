package render

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// pkoManifest is Package Operator's PackageManifest with every field its type has
// (package-operator.run/apis, manifests/v1alpha1), so that a Package Operator manifest is
// decoded strictly: a field its type does not have is refused by name, as pkgsync's own format
// is. The fields pkgsync shares with it are pkgsync's, test included (its types are Package
// Operator's, and pkgsync's own format has the same section); repositories and dependencies
// are decoded only to be refused.
type pkoManifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec pkoManifestSpec              `json:"spec,omitempty"`
	Test v1alpha1.PackageManifestTest `json:"test,omitempty"`
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
