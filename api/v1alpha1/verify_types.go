package v1alpha1

import "github.com/fluxcd/pkg/apis/meta"

// VerificationProviderCosign verifies cosign signatures.
const VerificationProviderCosign = "cosign"

// PublicKeySuffix ends the Secret data keys that hold public keys for spec.verify.
const PublicKeySuffix = ".pub"

// TrustedRootKey is the Secret data key of the Sigstore trusted root for keyless signatures.
const TrustedRootKey = "trusted_root.json"

// Verification says how a package image's signature is verified before the package is pulled
// and rendered.
type Verification struct {
	// Provider is the signature format: cosign. Signatures made with a key are read from the
	// tag sha256-<digest>.sig next to the image, as `pkgsync sign` and `cosign sign --key
	// --new-bundle-format=false` store them, then from the sigstore bundles that refer to the
	// image (OCI 1.1 referrers), as cosign 3 stores them by default; keyless signatures
	// (matchOIDCIdentity) from the same two places: the .sig tag's layers with a Fulcio
	// certificate and a Rekor bundle in their annotations (cosign 2), then the bundles.
	// +optional
	// +kubebuilder:default=cosign
	// +kubebuilder:validation:Enum=cosign
	Provider string `json:"provider,omitempty"`

	// SecretRef names a Secret of PEM public keys, one per data key ending in .pub (cosign.pub,
	// as `cosign generate-key-pair` writes it); a signature made with any of them verifies. With
	// matchOIDCIdentity it holds trusted_root.json instead. It lives in the resource's namespace
	// (for a ClusterPackage and a TrustPolicy, in the controller's namespace; in a
	// HostedClusterPackage's template, the fleet reads it in the controller's namespace, before a
	// digest becomes its target, and each member in its own) and is read on every reconcile, so a rotated key
	// takes effect at the next one. Keys are the trust: no transparency log is
	// consulted.
	// +required
	SecretRef meta.LocalObjectReference `json:"secretRef"`

	// MatchOIDCIdentity, when set, verifies keyless signatures instead of keys: a signature
	// counts when its certificate chains to a certificate authority of the Secret's
	// trusted_root.json (a Sigstore trusted root, as `cosign trusted-root create` writes it),
	// was issued to an identity one entry matches, and was logged in a transparency log of
	// that root within the certificate's validity (for cosign 2's .sig signatures: the log's
	// signed entry timestamp verifies with the root's log key), and what it signs names the
	// image's digest. Nothing is fetched from the network: the trusted root is the trust. The
	// Secret's .pub keys are not used.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	MatchOIDCIdentity []OIDCIdentityMatch `json:"matchOIDCIdentity,omitempty"`
}

// OIDCIdentityMatch matches the identity a keyless signature's certificate was issued to.
// Both are regular expressions (RE2) that must match the whole value.
type OIDCIdentityMatch struct {
	// Issuer matches the OIDC issuer that vouched for the signer:
	// https://token\.actions\.githubusercontent\.com.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Issuer string `json:"issuer"`

	// Subject matches the signer: the certificate's subject alternative name, an e-mail
	// address or, for a CI job, a URI such as
	// https://github\.com/org/repo/\.github/workflows/release\.yml@refs/tags/v.*.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Subject string `json:"subject"`
}
