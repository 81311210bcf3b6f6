package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// identityTokenEnv holds the OIDC identity token for keyless signing, as cosign reads it.
const identityTokenEnv = "SIGSTORE_ID_TOKEN"

// keylessFlags select keyless signing, with cosign's names for the services and the token.
type keylessFlags struct {
	keyless           bool
	fulcioURL         string
	rekorURL          string
	identityToken     string
	identityTokenFile string
	trustedRoot       string
}

func (f *keylessFlags) ApplyFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.keyless, "keyless", false, "Sign keylessly instead of with --key: an ephemeral key, a short-lived certificate from Fulcio "+
		"for the identity of --identity-token, the signature logged in Rekor (cosign sign without --key)")
	fs.StringVar(&f.fulcioURL, "fulcio-url", "https://fulcio.sigstore.dev", "With --keyless: the Fulcio certificate authority")
	fs.StringVar(&f.rekorURL, "rekor-url", "https://rekor.sigstore.dev", "With --keyless: the Rekor transparency log")
	fs.StringVar(&f.identityToken, "identity-token", "", "With --keyless: the OIDC identity token Fulcio checks (default $"+identityTokenEnv+"); "+
		"a token on the command line is visible to other users of the machine, prefer --identity-token-file or the variable")
	fs.StringVar(&f.identityTokenFile, "identity-token-file", "", "With --keyless: a file holding the OIDC identity token (a CI system's projected token)")
	fs.StringVar(&f.trustedRoot, "trusted-root", "", "With --keyless: check each signature once made against this Sigstore trusted root "+
		"(trusted_root.json): the certificate from its CA, the entry in its log")
}

// check refuses flags that do not go together; it says whether signing is keyless.
func (f *keylessFlags) check(fs *pflag.FlagSet, key string) (bool, error) {
	if !f.keyless {
		for _, name := range []string{"fulcio-url", "rekor-url", "identity-token", "identity-token-file", "trusted-root"} {
			if fs.Changed(name) {
				return false, usageError("--%s needs --keyless", name)
			}
		}
		return false, nil
	}
	if key != "" {
		return false, usageError("--key and --keyless exclude each other: an image is signed with a key or keylessly")
	}
	if f.identityToken != "" && f.identityTokenFile != "" {
		return false, usageError("--identity-token and --identity-token-file exclude each other")
	}
	return true, nil
}

// signing reads the token and the trusted root.
func (f *keylessFlags) signing() (signature.KeylessSigning, error) {
	token := f.identityToken
	switch {
	case f.identityTokenFile != "":
		data, err := os.ReadFile(f.identityTokenFile)
		if err != nil {
			return signature.KeylessSigning{}, fmt.Errorf("read --identity-token-file: %w", err)
		}
		token = string(data)
	case token == "":
		token = os.Getenv(identityTokenEnv)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return signature.KeylessSigning{}, usageError("--keyless needs an OIDC identity token: --identity-token-file, --identity-token or $%s", identityTokenEnv)
	}
	ks := signature.KeylessSigning{FulcioURL: f.fulcioURL, RekorURL: f.rekorURL, IdentityToken: token}
	if f.trustedRoot != "" {
		data, err := os.ReadFile(f.trustedRoot)
		if err != nil {
			return signature.KeylessSigning{}, fmt.Errorf("read --trusted-root: %w", err)
		}
		ks.TrustedRoot = data
	}
	return ks, nil
}

// signKeyless signs ref, and the statements as attestations, keylessly.
func signKeyless(cmd *cobra.Command, client *source.Client, ks signature.KeylessSigning, ref source.Reference, statements [][]byte) error {
	out, err := signature.SignKeyless(cmd.Context(), client, ref, ks, statements, nil)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Signed %s@%s as %s (signature %s)\n", ref.Name(), out.Digest, out.Identity, out.Signature)
	if len(out.Attestations) > 0 {
		names := make([]string, len(out.Attestations))
		for i, a := range out.Attestations {
			names[i] = a.String()
		}
		fmt.Fprintf(w, "Attested %s@%s as %s (attestations %s)\n", ref.Name(), out.Digest, out.Identity, strings.Join(names, ", "))
	}
	return nil
}
