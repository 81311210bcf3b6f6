package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"pkgsync.dev/pkgsync/source/signature"
)

func newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Manage signing keys",
	}
	cmd.AddCommand(newKeyGenerateCmd())
	return cmd
}

func newKeyGenerateCmd() *cobra.Command {
	var (
		prefix string
		force  bool
		output *outputFlag
	)
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write a cosign-compatible key pair (PREFIX.key, encrypted, and PREFIX.pub)",
		Long: `Generate writes an ECDSA P-256 key pair in cosign's format, as "cosign generate-key-pair" does:
PREFIX.key holds the private key encrypted with a password (scrypt and secretbox, PEM type
"ENCRYPTED SIGSTORE PRIVATE KEY"), PREFIX.pub the public key. "pkgsync sign --key", "pkgsync
build --sign --key" and cosign itself sign with the private key; a Package's spec.verify, a
TrustPolicy, "pkgsync verify --key" and "cosign verify --key" accept the public key.

The password comes from $COSIGN_PASSWORD (an empty value is an empty password), else it is asked
for twice on the terminal. Existing files are never overwritten unless --force is given.

It prints the files written; -o json and -o yaml print them as one document:
{"privateKey":..,"publicKey":..}.`,
		Example: `  COSIGN_PASSWORD=... pkgsync key generate
  pkgsync key generate --output-key-prefix release   # release.key, release.pub
  pkgsync key generate -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.check(); err != nil {
				return err
			}
			if prefix == "" {
				return usageError("--output-key-prefix must not be empty")
			}
			keyFile, pubFile := prefix+".key", prefix+".pub"
			if !force {
				for _, f := range []string{keyFile, pubFile} {
					if _, err := os.Lstat(f); err == nil {
						return fmt.Errorf("%s exists: not overwriting a key; choose another --output-key-prefix or pass --force", f)
					} else if !errors.Is(err, fs.ErrNotExist) {
						return fmt.Errorf("check %s: %w", f, err)
					}
				}
			}
			password, err := newPassword(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			priv, pub, err := signature.GenerateSigningKey(password)
			if err != nil {
				return err
			}
			// The private key first and owner-only: a failure after it leaves no public key
			// that names a private key nobody has.
			if err := writeKeyFile(keyFile, priv, 0o600, force); err != nil {
				return err
			}
			if err := writeKeyFile(pubFile, pub, 0o644, force); err != nil {
				return err
			}
			if output.document() {
				return output.writeDocument(cmd, "the key pair written", keyPairReport{PrivateKey: keyFile, PublicKey: pubFile})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Private key written to %s\nPublic key written to %s\n", keyFile, pubFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "output-key-prefix", "cosign", "Write the key pair to PREFIX.key and PREFIX.pub (cosign's flag)")
	cmd.Flags().BoolVar(&force, "force", false, "Overwrite existing key files")
	output = addOutputFlag(cmd.Flags(), outputText)
	return cmd
}

// keyPairReport is key generate's result as -o json and -o yaml print it: the files written.
type keyPairReport struct {
	PrivateKey string `json:"privateKey"`
	PublicKey  string `json:"publicKey"`
}

// newPassword is the password of a new key: $COSIGN_PASSWORD, else typed twice on a terminal.
func newPassword(stderr io.Writer) ([]byte, error) {
	if pw, ok := os.LookupEnv(passwordEnv); ok {
		return []byte(pw), nil
	}
	first, err := promptPassword(stderr, "Enter password for private key: ")
	if err != nil {
		return nil, err
	}
	again, err := promptPassword(stderr, "Enter password for private key again: ")
	if err != nil {
		return nil, err
	}
	if string(first) != string(again) {
		return nil, errors.New("the passwords do not match")
	}
	return first, nil
}

// writeKeyFile writes data with perm; without overwrite it refuses an existing file (O_EXCL),
// so a file created since the check, or a symlink planted there, is not followed.
func writeKeyFile(name string, data []byte, perm fs.FileMode, overwrite bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if overwrite {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replace %s: %w", name, err)
		}
	}
	f, err := os.OpenFile(name, flags, perm) //nolint:gosec // the user names the file
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
