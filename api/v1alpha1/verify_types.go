package v1alpha1

import "github.com/fluxcd/pkg/apis/meta"

// VerificationProviderCosign verifies cosign signatures.
const VerificationProviderCosign = "cosign"

// PublicKeySuffix ends the Secret data keys that hold public keys for spec.verify.
const PublicKeySuffix = ".pub"

// Verification says how a package image's signature is verified before the package is pulled
// and rendered.
type Verification struct {
	// Provider is the signature format: cosign (a signature in the registry next to the image,
	// under the tag sha256-<digest>.sig, as `cosign sign` and `pkgsync sign` store it).
	// +optional
	// +kubebuilder:default=cosign
	// +kubebuilder:validation:Enum=cosign
	Provider string `json:"provider,omitempty"`

	// SecretRef names a Secret of PEM public keys, one per data key ending in .pub (cosign.pub,
	// as `cosign generate-key-pair` writes it); a signature made with any of them verifies. It
	// lives in the resource's namespace (for a ClusterPackage, in the controller's namespace)
	// and is read on every reconcile, so a rotated key takes effect at the next one. Keys are
	// the trust: no transparency log is consulted.
	// +required
	SecretRef meta.LocalObjectReference `json:"secretRef"`
}
