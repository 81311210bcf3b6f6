package signature

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// newKey makes a cosign-format key pair and loads its private half.
func newKey(t *testing.T) (*SigningKey, []byte) {
	t.Helper()
	priv, pub, err := GenerateSigningKey([]byte("pw"))
	require.NoError(t, err)
	key, err := LoadSigningKey(priv, []byte("pw"))
	require.NoError(t, err)
	return key, pub
}

func mustKeys(t *testing.T, named map[string][]byte) *PublicKeys {
	t.Helper()
	keys, err := ParsePublicKeys(named)
	require.NoError(t, err)
	return keys
}

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	ctx := t.Context()
	img, ref := pushPackage(t, c, reg.Host, testenv.Repository(t, "signed"), nil)
	keyA, pubA := newKey(t)
	keyB, pubB := newKey(t)

	// Unsigned: refused, and said so.
	_, err := Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"a.pub": pubA}), nil)
	require.ErrorIs(t, err, ErrNoSignature)
	assert.ErrorContains(t, err, SignatureTag(img.Digest))

	sigRef, err := Sign(ctx, c, ref, keyA, nil)
	require.NoError(t, err)
	assert.Equal(t, "sha256-"+strings.TrimPrefix(img.Digest, "sha256:")+".sig", sigRef.Tag)

	v, err := Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"a.pub": pubA}), nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, v.Digest)
	assert.Equal(t, "a.pub", v.Key)

	// Another key: refused, naming the keys.
	_, err = Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"b.pub": pubB}), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid)
	assert.ErrorContains(t, err, "[b.pub]")
	assert.ErrorContains(t, err, "made by none of the keys")

	// Any key of the set may match.
	v, err = Verify(ctx, c, ref.WithDigest(img.Digest), mustKeys(t, map[string][]byte{"b.pub": pubB, "a.pub": pubA}), nil)
	require.NoError(t, err)
	assert.Equal(t, "a.pub", v.Key)

	// Signing again with the same key replaces its signature; another key adds one.
	_, err = Sign(ctx, c, ref, keyA, nil)
	require.NoError(t, err)
	m, err := readSignatureManifest(ctx, c, repositoryOf(t, c, ref), sigRef)
	require.NoError(t, err)
	assert.Len(t, m.Layers, 1)
	_, err = Sign(ctx, c, ref, keyB, nil)
	require.NoError(t, err)
	m, err = readSignatureManifest(ctx, c, repositoryOf(t, c, ref), sigRef)
	require.NoError(t, err)
	assert.Len(t, m.Layers, 2)
	for _, pub := range [][]byte{pubA, pubB} {
		_, err = Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"k.pub": pub}), nil)
		require.NoError(t, err)
	}

	// Tampered: a new, unsigned digest under the signed tag is refused.
	newDigest := pushOther(t, c, ref, "kind: ConfigMap\n")
	require.NotEqual(t, img.Digest, newDigest)
	_, err = Verify(ctx, c, ref, mustKeys(t, map[string][]byte{"a.pub": pubA}), nil)
	require.ErrorIs(t, err, ErrNoSignature)
	assert.ErrorContains(t, err, newDigest)
}

// A signature is bound to its digest: the signature manifest of one image copied to the
// signature tag of another does not verify the other.
func TestVerifyRefusesReplayedSignature(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	ctx := t.Context()
	name := testenv.Repository(t, "replay")
	img, ref := pushPackage(t, c, reg.Host, name, nil)
	key, pub := newKey(t)
	sigRef, err := Sign(ctx, c, ref.WithDigest(img.Digest), key, nil)
	require.NoError(t, err)

	evil := pushOther(t, c, mustRef(t, reg.Host+"/"+name+":evil"), "kind: Secret\n")
	repo := repositoryOf(t, c, ref)
	desc, rc, err := repo.FetchReference(ctx, sigRef.Tag)
	require.NoError(t, err)
	data, err := content.ReadAll(rc, desc)
	require.NoError(t, rc.Close())
	require.NoError(t, err)
	require.NoError(t, repo.PushReference(ctx, desc, bytes.NewReader(data), SignatureTag(evil)))

	_, err = Verify(ctx, c, mustRef(t, reg.Host+"/"+name+":evil"), mustKeys(t, map[string][]byte{"k.pub": pub}), nil)
	require.ErrorIs(t, err, ErrSignatureInvalid)
	assert.ErrorContains(t, err, "but for "+img.Digest+", not "+evil)
}

// What the registry serves under a signature tag is bounded and checked before it is believed.
func TestVerifyRefusesMalformedSignatures(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, source.Options{})
	ctx := t.Context()
	_, pub := newKey(t)
	keys := mustKeys(t, map[string][]byte{"k.pub": pub})
	big := bytes.Repeat([]byte("x"), maxPayloadBytes+1)

	cases := []struct {
		name   string
		layers func(repo string) []ocispec.Descriptor
		want   string
	}{
		{"no layers", func(string) []ocispec.Descriptor { return nil }, "holds no signature"},
		{"wrong media type", func(string) []ocispec.Descriptor {
			d := content.NewDescriptorFromBytes("application/octet-stream", []byte("{}"))
			return []ocispec.Descriptor{d}
		}, "is not " + SimpleSigningMediaType},
		{"no signature annotation", func(string) []ocispec.Descriptor {
			return []ocispec.Descriptor{content.NewDescriptorFromBytes(SimpleSigningMediaType, []byte("{}"))}
		}, "no " + SignatureAnnotation},
		{"oversized payload", func(repo string) []ocispec.Descriptor {
			d := content.NewDescriptorFromBytes(SimpleSigningMediaType, big)
			d.Annotations = map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString([]byte("sig"))}
			require.NoError(t, source.PushBlob(ctx, repositoryOf(t, c, mustRef(t, reg.Host+"/"+repo)), d, big))
			return []ocispec.Descriptor{d}
		}, "limit exceeded"},
		{"oversized signature", func(string) []ocispec.Descriptor {
			d := content.NewDescriptorFromBytes(SimpleSigningMediaType, []byte("{}"))
			d.Annotations = map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(make([]byte, maxSignatureBytes+3))}
			return []ocispec.Descriptor{d}
		}, "limit exceeded"},
		// Anyone who can push writes this manifest, and every resource verifying the digest reads
		// it: it is bounded far below the manifests of packages.
		{"oversized signature manifest", func(string) []ocispec.Descriptor {
			d := content.NewDescriptorFromBytes(SimpleSigningMediaType, []byte("{}"))
			d.Annotations = map[string]string{SignatureAnnotation: "c2ln", "padding": strings.Repeat("x", maxSignatureManifestBytes)}
			return []ocispec.Descriptor{d}
		}, "limit exceeded"},
		{"forged signature", func(repo string) []ocispec.Descriptor {
			body := []byte(`{"critical":{"type":"cosign container image signature"}}`)
			d := content.NewDescriptorFromBytes(SimpleSigningMediaType, body)
			d.Annotations = map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString([]byte("not a signature"))}
			require.NoError(t, source.PushBlob(ctx, repositoryOf(t, c, mustRef(t, reg.Host+"/"+repo)), d, body))
			return []ocispec.Descriptor{d}
		}, "made by none of the keys"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repoName := testenv.Repository(t, "malformed"+string(rune('a'+i)))
			img, ref := pushPackage(t, c, reg.Host, repoName, nil)
			pushSignatureManifest(t, c, ref, img.Digest, tc.layers(repoName))
			_, err := Verify(ctx, c, ref, keys, nil)
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// pushSignatureManifest tags a manifest with layers as the signatures of dgst.
func pushSignatureManifest(t *testing.T, c *source.Client, ref source.Reference, dgst string, layers []ocispec.Descriptor) {
	t.Helper()
	repo := repositoryOf(t, c, ref)
	config := []byte("{}")
	configDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, config)
	require.NoError(t, source.PushBlob(t.Context(), repo, configDesc, config))
	if layers == nil {
		layers = []ocispec.Descriptor{}
	}
	data, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: configDesc, Layers: layers})
	require.NoError(t, err)
	desc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, data)
	require.NoError(t, repo.PushReference(t.Context(), desc, bytes.NewReader(data), SignatureTag(dgst)))
}

func TestSigningKeys(t *testing.T) {
	t.Parallel()
	priv, pub, err := GenerateSigningKey([]byte("secret"))
	require.NoError(t, err)
	assert.Contains(t, string(priv), "BEGIN ENCRYPTED SIGSTORE PRIVATE KEY")

	_, err = LoadSigningKey(priv, []byte("wrong"))
	require.ErrorContains(t, err, "is the password right?")
	_, err = LoadSigningKey(pub, []byte("secret"))
	require.ErrorContains(t, err, "is not an encrypted cosign private key")
	_, err = LoadSigningKey([]byte("garbage"), nil)
	require.ErrorContains(t, err, "no PEM block")

	key, err := LoadSigningKey(priv, []byte("secret"))
	require.NoError(t, err)
	got, err := key.PublicKeyPEM()
	require.NoError(t, err)
	assert.Equal(t, string(pub), string(got))

	_, err = ParsePublicKeys(nil)
	require.ErrorContains(t, err, "no public key")
	_, err = ParsePublicKeys(map[string][]byte{"bad.pub": []byte("nope")})
	require.ErrorContains(t, err, "public key bad.pub")

	// The ID names the keys, not their names or order.
	_, pub2, err := GenerateSigningKey([]byte("x"))
	require.NoError(t, err)
	one := mustKeys(t, map[string][]byte{"a": pub, "b": pub2})
	two := mustKeys(t, map[string][]byte{"z": pub2, "y": pub})
	three := mustKeys(t, map[string][]byte{"a": pub})
	assert.Equal(t, one.ID(), two.ID())
	assert.NotEqual(t, one.ID(), three.ID())
	assert.Equal(t, []string{"a", "b"}, one.Names())
}
