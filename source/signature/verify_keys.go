package signature

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigstoresig "github.com/sigstore/sigstore/pkg/signature"
)

// PEM block types of the private keys `cosign generate-key-pair` writes: the key in PKCS #8,
// encrypted with scrypt and NaCl secretbox under a password.
const (
	sigstorePrivateKeyPEMType = "ENCRYPTED SIGSTORE PRIVATE KEY"
	cosignPrivateKeyPEMType   = "ENCRYPTED COSIGN PRIVATE KEY"
)

// maxPublicKeys bounds a key set: every signature is checked against every key.
const maxPublicKeys = 32

// PublicKeys is a set of named public keys; a signature made with any of them verifies. Its ID
// names the set for caches and messages.
type PublicKeys struct {
	keys []namedVerifier
	id   string
}

type namedVerifier struct {
	name     string
	verifier sigstoresig.Verifier
}

// ParsePublicKeys reads PEM public keys (ECDSA, RSA or Ed25519, as `cosign generate-key-pair` and
// `openssl` write them), each under a name used in messages (a file or Secret key name). It
// refuses an empty set and a name whose data holds no public key.
func ParsePublicKeys(named map[string][]byte) (*PublicKeys, error) {
	if len(named) == 0 {
		return nil, errors.New("no public key given")
	}
	if len(named) > maxPublicKeys {
		return nil, fmt.Errorf("%d public keys given, at most %d are accepted", len(named), maxPublicKeys)
	}
	names := make([]string, 0, len(named))
	for name := range named {
		names = append(names, name)
	}
	slices.Sort(names)
	set := &PublicKeys{}
	ids := make([]string, 0, len(names))
	for _, name := range names {
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(named[name])
		if err != nil {
			return nil, fmt.Errorf("public key %s: %w (want a PEM \"PUBLIC KEY\" block, as cosign.pub holds)", name, err)
		}
		v, err := sigstoresig.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("public key %s: %w", name, err)
		}
		der, err := cryptoutils.MarshalPublicKeyToDER(pub)
		if err != nil {
			return nil, fmt.Errorf("public key %s: %w", name, err)
		}
		sum := sha256.Sum256(der)
		ids = append(ids, hex.EncodeToString(sum[:]))
		set.keys = append(set.keys, namedVerifier{name: name, verifier: v})
	}
	// The ID depends on the keys only, not on their names or order.
	slices.Sort(ids)
	ids = slices.Compact(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, ",")))
	set.id = "sha256:" + hex.EncodeToString(sum[:])
	return set, nil
}

// ID identifies the set by its keys: the SHA-256 of their sorted fingerprints. Names do not count.
func (k *PublicKeys) ID() string { return k.id }

// Names lists the key names, sorted.
func (k *PublicKeys) Names() []string {
	out := make([]string, len(k.keys))
	for i, key := range k.keys {
		out[i] = key.name
	}
	return out
}

// String names the keys for messages: "[a.pub b.pub] (sha256:...)".
func (k *PublicKeys) String() string {
	return fmt.Sprintf("%v (%s)", k.Names(), k.id)
}

// SigningKey signs package images as cosign does.
type SigningKey struct {
	signer sigstoresig.SignerVerifier
	public crypto.PublicKey
}

// LoadSigningKey decrypts a private key in cosign's format (`cosign generate-key-pair`: a PEM
// block "ENCRYPTED SIGSTORE PRIVATE KEY" or "ENCRYPTED COSIGN PRIVATE KEY") with password.
func LoadSigningKey(pemData, password []byte) (*SigningKey, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil, errors.New("read signing key: no PEM block found")
	}
	if block.Type != sigstorePrivateKeyPEMType && block.Type != cosignPrivateKeyPEMType {
		return nil, fmt.Errorf("read signing key: PEM block %q is not an encrypted cosign private key (%q)", block.Type, sigstorePrivateKeyPEMType)
	}
	der, err := encrypted.Decrypt(block.Bytes, password)
	if err != nil {
		return nil, fmt.Errorf("read signing key: decrypt: %w (is the password right?)", err)
	}
	priv, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	sv, err := sigstoresig.LoadSignerVerifier(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	return &SigningKey{signer: sv, public: pub}, nil
}

// PublicKeyPEM returns the public half of the key, PEM-encoded as cosign.pub holds it.
func (k *SigningKey) PublicKeyPEM() ([]byte, error) {
	return cryptoutils.MarshalPublicKeyToPEM(k.public)
}

// GenerateSigningKey makes an ECDSA P-256 key pair in cosign's format: the private key PEM
// encrypted with password (what `cosign generate-key-pair` writes to cosign.key) and the public
// key PEM (cosign.pub).
func GenerateSigningKey(password []byte) (privatePEM, publicPEM []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	enc, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: encrypt: %w", err)
	}
	publicPEM, err = cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: sigstorePrivateKeyPEMType, Bytes: enc}), publicPEM, nil
}
