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
	var (
		registry     registryOptions
		keys         []string
		attestations []string
		// Keyless: a certificate of the trusted root's CA issued to one of the identities.
		identities  []string
		issuer      string
		trustedRoot string
	)
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

It exits 0 when a signature (and every attestation asked for) verifies and 1 otherwise.`,
		Example: `  pkgsync verify registry.example.com/team/my-package:v1 --key cosign.pub
  pkgsync verify ghcr.io/pkgsync/pkgsync:v0.1.0 --key pkgsync-release.pub --attestation slsaprovenance1 --attestation spdxjson`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("verify takes one image reference, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			refs, err := parseReferences(args[0])
			if err != nil {
				return err
			}
			keyless := len(identities) > 0 || issuer != "" || trustedRoot != ""
			switch {
			case keyless && len(keys) > 0:
				return usageError("--key and --identity exclude each other: the image is verified with a key or keylessly")
			case keyless && (len(identities) == 0 || issuer == "" || trustedRoot == ""):
				return usageError("keyless verification needs --identity, --oidc-issuer and --trusted-root together")
			case keyless && len(attestations) > 0:
				return usageError("--attestation is checked with --key only; keyless attestations verify with cosign verify-attestation")
			case keyless:
				return verifyKeylessCmd(cmd, &registry, refs[0], trustedRoot, issuer, identities)
			}
			if len(keys) == 0 {
				return usageError("--key (or --identity) is required: a public key file (cosign.pub) to verify with")
			}
			set, err := readPublicKeys("--key", keys)
			if err != nil {
				return err
			}
			types := make([]string, len(attestations))
			for i, a := range attestations {
				if types[i], err = predicateType(a); err != nil {
					return err
				}
			}
			client, err := registry.client(cmd.ErrOrStderr(), refs...)
			if err != nil {
				return err
			}
			v, err := signature.Verify(cmd.Context(), client, refs[0], set, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Verified %s@%s with %s\n", refs[0].Name(), v.Digest, v.Key)
			// The attestations of the digest just verified, not of whatever the tag names now.
			pinned := refs[0].WithDigest(v.Digest)
			for _, t := range types {
				a, err := signature.VerifyAttestation(cmd.Context(), client, pinned, set, t, nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Verified the %s attestation of %s@%s with %s\n", a.PredicateType, refs[0].Name(), a.Digest, a.Key)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "Public key file in PEM (cosign.pub); any of several may match (repeatable)")
	cmd.Flags().StringArrayVar(&attestations, "attestation", nil, "Also require a signed attestation of this predicate type: slsaprovenance1, spdxjson or a URI (repeatable)")
	cmd.Flags().StringArrayVar(&identities, "identity", nil, "Verify a keyless signature instead of a key: a regular expression (RE2, whole value) "+
		"the signing certificate's subject must match (repeatable; any may match); needs --oidc-issuer and --trusted-root")
	cmd.Flags().StringVar(&issuer, "oidc-issuer", "", "With --identity: a regular expression the OIDC issuer that vouched for the signer must match")
	cmd.Flags().StringVar(&trustedRoot, "trusted-root", "", "With --identity: the Sigstore trusted root (trusted_root.json); nothing is fetched")
	registry.ApplyFlags(cmd.Flags())
	return cmd
}

// verifyKeylessCmd verifies ref's keyless signature for one of the identities.
func verifyKeylessCmd(cmd *cobra.Command, registry *registryOptions, ref source.Reference, trustedRoot, issuer string, identities []string) error {
	trusted, err := os.ReadFile(trustedRoot)
	if err != nil {
		return fmt.Errorf("read --trusted-root: %w", err)
	}
	ids := make([]signature.OIDCIdentity, len(identities))
	for i, subject := range identities {
		ids[i] = signature.OIDCIdentity{Issuer: issuer, Subject: subject}
	}
	policy, err := signature.NewKeylessPolicy(trusted, ids)
	if err != nil {
		return usageError("--trusted-root, --identity: %w", err)
	}
	client, err := registry.client(cmd.ErrOrStderr(), ref)
	if err != nil {
		return err
	}
	v, err := signature.VerifyKeyless(cmd.Context(), client, ref, policy, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Verified %s@%s with %s\n", ref.Name(), v.Digest, v.Key)
	return nil
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
