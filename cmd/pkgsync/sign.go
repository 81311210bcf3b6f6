package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"pkgsync.dev/pkgsync/source"
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
func (f *signingKeyFlags) load(stderr io.Writer) (*source.SigningKey, error) {
	if f.key == "" {
		return nil, usageError("--key is required: the private key file (cosign.key) to sign with")
	}
	data, err := os.ReadFile(f.key)
	if err != nil {
		return nil, fmt.Errorf("read --key: %w", err)
	}
	password, ok := os.LookupEnv(passwordEnv)
	if !ok {
		pw, err := promptPassword(stderr, "Password for "+f.key+": ")
		if err != nil {
			return nil, fmt.Errorf("read --key %s: %w", f.key, err)
		}
		password = string(pw)
	}
	key, err := source.LoadSigningKey(data, []byte(password))
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", f.key, err)
	}
	return key, nil
}

func newSignCmd() *cobra.Command {
	var (
		registry registryOptions
		keyFlags signingKeyFlags
	)
	cmd := &cobra.Command{
		Use:   "sign REF --key cosign.key",
		Short: "Sign a package image in a registry, as cosign does",
		Long: `Sign signs the image REF names (a tag is resolved to its digest first) with a private key in
cosign's format and stores the signature in the registry as "cosign sign --key" does: a layer of
the manifest tagged sha256-<digest>.sig in the same repository. "cosign verify --key cosign.pub
--insecure-ignore-tlog" and "pkgsync verify" accept it, and so does a Package whose spec.verify
names the public key. Nothing is uploaded to a transparency log.

The key's password is read from $COSIGN_PASSWORD, or asked for on a terminal.`,
		Example: `  pkgsync key generate
  COSIGN_PASSWORD=... pkgsync sign registry.example.com/team/my-package:v1 --key cosign.key`,
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
			key, err := keyFlags.load(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			client, err := registry.client(cmd.ErrOrStderr(), refs...)
			if err != nil {
				return err
			}
			return signImages(cmd, client, key, refs, true)
		},
	}
	keyFlags.ApplyFlags(cmd.Flags())
	registry.ApplyFlags(cmd.Flags())
	return cmd
}

// signImages signs every ref and, for text output, says where each signature went.
func signImages(cmd *cobra.Command, client *source.Client, key *source.SigningKey, refs []source.Reference, text bool) error {
	for _, ref := range refs {
		sig, err := client.Sign(cmd.Context(), ref, key, nil)
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
