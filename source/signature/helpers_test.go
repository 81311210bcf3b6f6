package signature

import (
	"testing"

	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/test/testenv"
)

func newClient(t *testing.T, opts source.Options) *source.Client {
	t.Helper()
	c, err := source.NewClient(opts)
	require.NoError(t, err)
	return c
}

func mustRef(t *testing.T, s string) source.Reference {
	t.Helper()
	ref, err := source.ParseReference(s)
	require.NoError(t, err)
	return ref
}

// repositoryOf is the repository ref names, read anonymously.
func repositoryOf(t *testing.T, c *source.Client, ref source.Reference) *remote.Repository {
	t.Helper()
	repo, err := c.Repository(t.Context(), ref, nil)
	require.NoError(t, err)
	return repo
}

// pushPackage builds the test package and pushes it to HOST/REPO:v1.
func pushPackage(t *testing.T, c *source.Client, host, repo string, creds source.Credentials) (*source.Image, source.Reference) {
	t.Helper()
	img, err := source.Build(testenv.PackageDir(t), source.BuildOptions{Version: "1.0.0"})
	require.NoError(t, err)
	ref := mustRef(t, host+"/"+repo+":v1")
	_, err = c.Push(t.Context(), img, []source.Reference{ref}, creds)
	require.NoError(t, err)
	return img, ref
}

// pushOther pushes a package with other content under HOST/REPO:TAG and returns its digest.
func pushOther(t *testing.T, c *source.Client, ref source.Reference, content string) string {
	t.Helper()
	dir := testenv.PackageDir(t)
	testenv.WriteTree(t, dir, map[string]string{"deploy/extra.yaml": content})
	img, err := source.Build(dir, source.BuildOptions{Version: "1.0.1"})
	require.NoError(t, err)
	_, err = c.Push(t.Context(), img, []source.Reference{ref}, nil)
	require.NoError(t, err)
	return img.Digest
}
