package main

import (
	"encoding/pem"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// passwordEnv holds the password of the signing key, as cosign reads it.
const passwordEnv = "COSIGN_PASSWORD"

// signingKeyFlags select the private key that signs images.
type signingKeyFlags struct {
	key string
}

func (f *signingKeyFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.key, "key", "", "Private key file in cosign's format (cosign.key from \"pkgsync key generate\" or \"cosign generate-key-pair\"); "+
		"its password comes from $"+passwordEnv+", or a prompt on a terminal")
}

// load reads and decrypts the key. The password is $COSIGN_PASSWORD (an empty value is an
// empty password), else asked for on the terminal.
func (f *signingKeyFlags) load(stderr io.Writer) (*signature.SigningKey, error) {
	if f.key == "" {
		return nil, usageError("--key is required: the private key file (cosign.key) to sign with")
	}
	data, err := os.ReadFile(f.key)
	if err != nil {
		return nil, fmt.Errorf("read --key: %w", err)
	}
	// Before the password: a public key has none to ask for.
	if block, _ := pem.Decode(data); block != nil && block.Type == "PUBLIC KEY" {
		return nil, usageError("--key %s is a public key: sign with the private key (cosign.key) of the pair; the public key is what verify --key and a Package's spec.verify check with", f.key)
	}
	password, ok := os.LookupEnv(passwordEnv)
	if !ok {
		pw, err := promptPassword(stderr, "Password for "+f.key+": ")
		if err != nil {
			return nil, fmt.Errorf("read --key %s: %w", f.key, err)
		}
		password = string(pw)
	}
	key, err := signature.LoadSigningKey(data, []byte(password))
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", f.key, err)
	}
	return key, nil
}

func newSignCmd() *cobra.Command {
	var (
		registry     registryOptions
		keyFlags     signingKeyFlags
		keylessFlags keylessFlags
		attest       attestFlags
	)
	cmd := &cobra.Command{
		Use:   "sign REF --key cosign.key | --keyless",
		Short: "Sign a package image in a registry, as cosign does",
		Long: `Sign signs the image REF names (a tag is resolved to its digest first) with a private key in
cosign's format and stores the signature in the registry as "cosign sign --key" does: a layer of
the manifest tagged sha256-<digest>.sig in the same repository. "cosign verify --key cosign.pub
--insecure-ignore-tlog" and "pkgsync verify" accept it, and so does a Package whose spec.verify
names the public key. Nothing is uploaded to a transparency log.

With --provenance and --sbom (the files "make image" writes to dist/), it also signs them as
attestations of the image, as "cosign attest" does: DSSE envelopes of in-toto statements about
the image's digest, in the manifest tagged sha256-<digest>.att. "cosign verify-attestation --key
cosign.pub --type slsaprovenance1" (or spdxjson) and "pkgsync verify --attestation" accept them.
A provenance statement about other content than the image is refused.

The key's password is read from $COSIGN_PASSWORD, or asked for on a terminal.

With --keyless instead of --key, it signs as "cosign sign" does without a key: an ephemeral key,
a certificate Fulcio (--fulcio-url) issues for it to the identity of the OIDC token
(--identity-token-file, --identity-token or $SIGSTORE_ID_TOKEN), each signature logged in Rekor
(--rekor-url). The signature and the attestations are sigstore bundles stored as OCI referrers of
the image, as cosign 3 stores them: "cosign verify --certificate-identity ID
--certificate-oidc-issuer ISSUER", "cosign verify-attestation" and "pkgsync install
--verify-identity" accept them, and so does a Package whose spec.verify names the identity. A
certificate for another key than the one that asked is refused before anything is logged.
--trusted-root checks each bundle against a trusted root before it is pushed.`,
		Example: `  pkgsync key generate
  COSIGN_PASSWORD=... pkgsync sign registry.example.com/team/my-package:v1 --key cosign.key
  COSIGN_PASSWORD=... pkgsync sign ghcr.io/pkgsync/pkgsync:v0.1.0 --key release.key \
      --provenance dist/provenance.intoto.json --sbom dist/pkgsync.spdx.json
  pkgsync sign ghcr.io/pkgsync/pkgsync:v0.1.0 --keyless --identity-token-file "$ACTIONS_ID_TOKEN_FILE" \
      --provenance dist/provenance.intoto.json --sbom dist/pkgsync.spdx.json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("sign takes one image reference, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			refs, err := parseReferences(args[0])
			if err != nil {
				return err
			}
			keyless, err := keylessFlags.check(cmd.Flags(), keyFlags.key)
			if err != nil {
				return err
			}
			if keyless {
				ks, err := keylessFlags.signing()
				if err != nil {
					return err
				}
				client, err := registry.client(cmd.ErrOrStderr(), refs...)
				if err != nil {
					return err
				}
				ref, statements, err := attest.about(cmd.Context(), client, refs[0])
				if err != nil {
					return err
				}
				return signKeyless(cmd, client, ks, ref, statements)
			}
			key, err := keyFlags.load(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			client, err := registry.client(cmd.ErrOrStderr(), refs...)
			if err != nil {
				return err
			}
			if !attest.any() {
				return signImages(cmd, client, key, refs, true)
			}
			ref, statements, err := attest.about(cmd.Context(), client, refs[0])
			if err != nil {
				return err
			}
			if err := signImages(cmd, client, key, []source.Reference{ref}, true); err != nil {
				return err
			}
			att, err := signature.Attest(cmd.Context(), client, ref, key, statements, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Attested %s (attestations %s)\n", ref, att)
			return nil
		},
	}
	keyFlags.ApplyFlags(cmd.Flags())
	keylessFlags.ApplyFlags(cmd.Flags())
	attest.ApplyFlags(cmd.Flags())
	registry.ApplyFlags(cmd.Flags())
	return cmd
}

// signImages signs every ref and, for text output, says where each signature went.
func signImages(cmd *cobra.Command, client *source.Client, key *signature.SigningKey, refs []source.Reference, text bool) error {
	for _, ref := range refs {
		sig, err := signature.Sign(cmd.Context(), client, ref, key, nil)
		if err != nil {
			return err
		}
		if text {
			fmt.Fprintf(cmd.OutOrStdout(), "Signed %s (signature %s)\n", ref, sig)
		}
	}
	return nil
}

// promptPassword asks for a password on the terminal, without echo.
func promptPassword(stderr io.Writer, prompt string) ([]byte, error) {
	fd := int(os.Stdin.Fd()) //nolint:gosec // a file descriptor fits an int
	if !term.IsTerminal(fd) {
		return nil, fmt.Errorf("set $%s to the key's password (no terminal to ask on)", passwordEnv)
	}
	fmt.Fprint(stderr, prompt)
	pw, err := term.ReadPassword(fd)
	fmt.Fprintln(stderr)
	if err != nil {
		return nil, fmt.Errorf("read the password: %w", err)
	}
	return pw, nil
}
