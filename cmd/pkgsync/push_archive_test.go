package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/internal/image"
	"pkgsync.dev/pkgsync/internal/intoto"
	"pkgsync.dev/pkgsync/test/testenv"
)

// TestPushArchiveWithAttachments: pkgsync push of the controller image's archive (make image)
// pushes the image and what the archive holds beside it: the SBOM and provenance as OCI
// referrers of the index, and the SBOM under cosign's sha256-HEX.sbom tag.
func TestPushArchiveWithAttachments(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	bin := filepath.Join(t.TempDir(), "pkgsync")
	require.NoError(t, os.WriteFile(bin, []byte("#!pkgsync"), 0o755))
	created := time.Unix(1700000000, 0).UTC()
	idx, err := image.Build(image.Options{Binaries: []image.Binary{{OS: "linux", Arch: "amd64", Path: bin}},
		Version: "v1.2.3-test", Revision: "0123456789abcdef", Source: "https://github.com/pkgsync/pkgsync", Created: created})
	require.NoError(t, err)
	d, err := idx.Digest()
	require.NoError(t, err)
	size, err := idx.Size()
	require.NoError(t, err)
	repo := reg.Host + "/" + testenv.Repository(t, "pkgsync/controller")
	sbom := []byte(`{"spdxVersion":"SPDX-2.3"}`)
	stmt, err := intoto.SBOMStatement(sbom, repo, d.String())
	require.NoError(t, err)
	attachments, err := image.Attachments(ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.Digest(d.String()), Size: size}, sbom, stmt, created)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, image.WriteLayout(&buf, idx, "v1.2.3-test", attachments...))
	archive := filepath.Join(t.TempDir(), "pkgsync-image.tar")
	require.NoError(t, os.WriteFile(archive, buf.Bytes(), 0o600))

	stdout, stderr, err := runCLI(t, "push", archive, repo+":v1.2.3-test")
	require.NoError(t, err, stderr)
	assert.Contains(t, stdout, "Pushed "+repo+":v1.2.3-test")
	assert.Contains(t, stdout, "Attached 3 manifest(s) about "+repo+" in "+repo)

	r := plainRepository(t, repo)
	desc, err := r.Resolve(t.Context(), "v1.2.3-test")
	require.NoError(t, err)
	assert.Equal(t, d.String(), desc.Digest.String(), "the tag names the index that was built")
	var types []string
	require.NoError(t, r.Referrers(t.Context(), desc, "", func(refs []ocispec.Descriptor) error {
		for _, ref := range refs {
			types = append(types, ref.ArtifactType)
		}
		return nil
	}))
	assert.ElementsMatch(t, []string{intoto.SPDXMediaType, intoto.MediaType}, types)
	m := fetchManifest(t, repo, strings.Replace(d.String(), ":", "-", 1)+".sbom")
	assert.Len(t, m.Layers, 1, "cosign's .sbom tag holds the SBOM")
}
