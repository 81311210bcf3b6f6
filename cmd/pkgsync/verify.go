package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

func newVerifyCmd() *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify REF --key cosign.pub [--key other.pub...] | --identity RE --oidc-issuer RE --trusted-root FILE",
		Short: "Verify the cosign signature of a package image",
		Long: `Verify checks that the image REF names (a tag is resolved to its digest first) carries a
cosign signature, stored in the registry next to it under the tag sha256-<digest>.sig, made by
one of the --key public keys over that digest: what the controller checks for a Package with
spec.verify. Signatures made by "pkgsync sign" and by "cosign sign --key" both count. No
transparency log is consulted: the keys are the trust.

--attestation TYPE also requires an attestation of that predicate type (slsaprovenance1,
spdxjson, or a predicate type URI), stored as "cosign attest" and "pkgsync sign --provenance
--sbom" store them: a DSSE envelope one of the keys signed, of an in-toto statement about the
image's digest. The controller image of a release carries both.

--identity, --oidc-issuer and --trusted-root verify a keyless signature instead ("pkgsync sign
--keyless", "cosign sign" without a key): a certificate the trusted root's CA issued to a
matching identity, logged in a transparency log of the root. Nothing is fetched but the image's
signatures.

It prints a line per signature and attestation verified; -o json and -o yaml print them as one
document ({"image", "digest", "key", "signature", "attestations": [{"predicateType", "digest",
"key"}]}), and nothing when verification fails. It exits 0 when a signature (and every
attestation asked for) verifies and 1 otherwise.`,
		Example: `  pkgsync verify registry.example.com/team/my-package:v1 --key cosign.pub
  pkgsync verify ghcr.io/pkgsync/pkgsync:v0.1.0 --key pkgsync-release.pub --attestation slsaprovenance1 --attestation spdxjson`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("verify takes one image reference, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.check(); err != nil {
				return err
			}
			res, err := o.verify(cmd, args[0])
			if err != nil {
				return err
			}
			if o.output.document() {
				return o.output.writeDocument(cmd, "the verification of "+args[0], res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Verified %s@%s with %s\n", res.Image, res.Digest, res.Key)
			for _, a := range res.Attestations {
				fmt.Fprintf(w, "Verified the %s attestation of %s@%s with %s\n", a.PredicateType, res.Image, a.Digest, a.Key)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&o.keys, "key", nil, "Public key file in PEM (cosign.pub); any of several may match (repeatable)")
	cmd.Flags().StringArrayVar(&o.attestations, "attestation", nil, "Also require a signed attestation of this predicate type: slsaprovenance1, spdxjson or a URI (repeatable)")
	cmd.Flags().StringArrayVar(&o.identities, "identity", nil, "Verify a keyless signature instead of a key: a regular expression (RE2, whole value) "+
		"the signing certificate's subject must match (repeatable; any may match); needs --oidc-issuer and --trusted-root")
	cmd.Flags().StringVar(&o.issuer, "oidc-issuer", "", "With --identity: a regular expression the OIDC issuer that vouched for the signer must match")
	cmd.Flags().StringVar(&o.trustedRoot, "trusted-root", "", "With --identity: the Sigstore trusted root (trusted_root.json); nothing is fetched")
	o.registry.ApplyFlags(cmd.Flags())
	o.output = addOutputFlag(cmd.Flags(), outputText)
	return cmd
}

// verifyOptions are verify's flags.
type verifyOptions struct {
	registry     registryOptions
	keys         []string
	attestations []string
	// Keyless: a certificate of the trusted root's CA issued to one of the identities.
	identities  []string
	issuer      string
	trustedRoot string
	output      *outputFlag
}

// verifyOutput is what verify prints: -o json and -o yaml as a document of its own.
type verifyOutput struct {
	// Image is REGISTRY/REPOSITORY, without tag or digest.
	Image string `json:"image"`
	// Digest is the verified manifest digest.
	Digest string `json:"digest"`
	// Key names the key file, or the keyless signer, that verified a signature.
	Key string `json:"key"`
	// Signature is the reference of the signature verified.
	Signature    string                `json:"signature"`
	Attestations []verifiedAttestation `json:"attestations"`
}

type verifiedAttestation struct {
	PredicateType string `json:"predicateType"`
	Digest        string `json:"digest"`
	Key           string `json:"key"`
}

// verify checks the signature (and the attestations asked for) of the image arg names.
func (o *verifyOptions) verify(cmd *cobra.Command, arg string) (*verifyOutput, error) {
	refs, err := parseReferences(arg)
	if err != nil {
		return nil, err
	}
	keyless := len(o.identities) > 0 || o.issuer != "" || o.trustedRoot != ""
	switch {
	case keyless && len(o.keys) > 0:
		return nil, usageError("--key and --identity exclude each other: the image is verified with a key or keylessly")
	case keyless && (len(o.identities) == 0 || o.issuer == "" || o.trustedRoot == ""):
		return nil, usageError("keyless verification needs --identity, --oidc-issuer and --trusted-root together")
	case keyless && len(o.attestations) > 0:
		return nil, usageError("--attestation is checked with --key only; keyless attestations verify with cosign verify-attestation")
	case keyless:
		return verifyKeylessCmd(cmd, &o.registry, refs[0], o.trustedRoot, o.issuer, o.identities)
	case len(o.keys) == 0:
		return nil, usageError("--key (or --identity) is required: a public key file (cosign.pub) to verify with")
	}
	set, err := readPublicKeys("--key", o.keys)
	if err != nil {
		return nil, err
	}
	types := make([]string, len(o.attestations))
	for i, a := range o.attestations {
		if types[i], err = predicateType(a); err != nil {
			return nil, err
		}
	}
	client, err := o.registry.client(cmd.ErrOrStderr(), refs...)
	if err != nil {
		return nil, err
	}
	v, err := signature.Verify(cmd.Context(), client, refs[0], set, nil)
	if err != nil {
		return nil, err
	}
	res := verificationOutput(refs[0], v)
	// The attestations of the digest just verified, not of whatever the tag names now.
	pinned := refs[0].WithDigest(v.Digest)
	for _, t := range types {
		a, err := signature.VerifyAttestation(cmd.Context(), client, pinned, set, t, nil)
		if err != nil {
			return nil, err
		}
		res.Attestations = append(res.Attestations, verifiedAttestation{PredicateType: a.PredicateType, Digest: a.Digest, Key: a.Key})
	}
	return res, nil
}

// verificationOutput is the document of a verified signature, without attestations yet.
func verificationOutput(ref source.Reference, v *signature.Verification) *verifyOutput {
	return &verifyOutput{Image: ref.Name(), Digest: v.Digest, Key: v.Key, Signature: v.Signature.String(), Attestations: []verifiedAttestation{}}
}

// verifyKeylessCmd verifies ref's keyless signature for one of the identities.
func verifyKeylessCmd(cmd *cobra.Command, registry *registryOptions, ref source.Reference, trustedRoot, issuer string, identities []string) (*verifyOutput, error) {
	trusted, err := os.ReadFile(trustedRoot)
	if err != nil {
		return nil, fmt.Errorf("read --trusted-root: %w", err)
	}
	ids := make([]signature.OIDCIdentity, len(identities))
	for i, subject := range identities {
		ids[i] = signature.OIDCIdentity{Issuer: issuer, Subject: subject}
	}
	policy, err := signature.NewKeylessPolicy(trusted, ids)
	if err != nil {
		return nil, usageError("--trusted-root, --identity: %w", err)
	}
	client, err := registry.client(cmd.ErrOrStderr(), ref)
	if err != nil {
		return nil, err
	}
	v, err := signature.VerifyKeyless(cmd.Context(), client, ref, policy, nil)
	if err != nil {
		return nil, err
	}
	return verificationOutput(ref, v), nil
}

// readPublicKeys reads the PEM public key files a flag names, each named by its file name.
func readPublicKeys(flag string, paths []string) (*signature.PublicKeys, error) {
	named := map[string][]byte{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", flag, err)
		}
		named[filepath.Base(path)] = data
	}
	set, err := signature.ParsePublicKeys(named)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return set, nil
}
