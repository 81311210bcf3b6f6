package signature

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

// mirroredPackage pushes the test package to repo:v1 in the source registry and in its mirror.
func mirroredPackage(t *testing.T, src, mirror *testenv.Registry, repo string) *source.Image {
	t.Helper()
	img, err := source.Build(testenv.PackageDir(t), source.BuildOptions{Version: "1.0.0"})
	require.NoError(t, err)
	pusher := newClient(t, source.Options{})
	for _, reg := range []*testenv.Registry{src, mirror} {
		_, err := pusher.Push(t.Context(), img, []source.Reference{mustRef(t, reg.Host+"/"+repo+":v1")}, nil)
		require.NoError(t, err)
	}
	return img
}

// TestVerifyThroughMirror: signatures are read at the mirror that serves the content and verify
// as they did at the source.
func TestVerifyThroughMirror(t *testing.T) {
	t.Parallel()
	src := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	mirror := testenv.NewRegistry(t, testenv.RegistryOptions{Own: true})
	img := mirroredPackage(t, src, mirror, "team/pkg")
	key, pub := newKey(t)
	keys := mustKeys(t, map[string][]byte{"release": pub})
	signer := newClient(t, source.Options{})
	pinned := mustRef(t, src.Host+"/team/pkg@"+img.Digest)
	_, err := Sign(t.Context(), signer, pinned, key, nil)
	require.NoError(t, err)

	sets := source.MirrorSets{Digest: []source.MirrorSet{{Source: src.Host + "/team", Mirrors: []string{mirror.Host + "/team"}}}}
	c := newClient(t, source.Options{MirrorSets: sets})
	// The mirror holds the content but not the signature: the source's is not looked up.
	_, err = Verify(t.Context(), c, pinned, keys, nil)
	require.ErrorIs(t, err, ErrNoSignature)

	// The signature copied to the mirror, the source gone.
	srcRepo, err := remote.NewRepository(src.Host + "/team/pkg")
	require.NoError(t, err)
	srcRepo.PlainHTTP = true
	dstRepo, err := remote.NewRepository(mirror.Host + "/team/pkg")
	require.NoError(t, err)
	dstRepo.PlainHTTP = true
	_, err = oras.Copy(t.Context(), srcRepo, SignatureTag(img.Digest), dstRepo, SignatureTag(img.Digest), oras.DefaultCopyOptions)
	require.NoError(t, err)
	require.NoError(t, src.Stop())
	v, err := Verify(t.Context(), c, pinned, keys, nil)
	require.NoError(t, err)
	assert.Equal(t, img.Digest, v.Digest)
	assert.Equal(t, mirror.Host, v.Signature.Registry)
}
