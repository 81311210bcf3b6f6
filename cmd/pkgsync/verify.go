package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/source"
)

func newVerifyCmd() *cobra.Command {
	var (
		registry     registryOptions
		keys         []string
		attestations []string
	)
	cmd := &cobra.Command{
		Use:   "verify REF --key cosign.pub [--key other.pub...]",
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
			if len(keys) == 0 {
				return usageError("--key is required: a public key file (cosign.pub) to verify with")
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
			v, err := client.Verify(cmd.Context(), refs[0], set, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Verified %s@%s with %s\n", refs[0].Name(), v.Digest, v.Key)
			// The attestations of the digest just verified, not of whatever the tag names now.
			pinned := refs[0].WithDigest(v.Digest)
			for _, t := range types {
				a, err := client.VerifyAttestation(cmd.Context(), pinned, set, t, nil)
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
	registry.ApplyFlags(cmd.Flags())
	return cmd
}

// readPublicKeys reads the PEM public key files a flag names, each named by its file name.
func readPublicKeys(flag string, paths []string) (*source.PublicKeys, error) {
	named := map[string][]byte{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", flag, err)
		}
		named[filepath.Base(path)] = data
	}
	set, err := source.ParsePublicKeys(named)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return set, nil
}
