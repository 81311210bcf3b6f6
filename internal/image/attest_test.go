package image

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/internal/intoto"
	"pkgsync.dev/pkgsync/source"
)

// goBinaryOptions builds with this test binary as both platforms' binary: it has Go build
// information, as the real one does.
func goBinaryOptions(t *testing.T) Options {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	opts := testOptions(t)
	opts.Revision = "0123456789abcdef0123456789abcdef01234567"
	opts.Binaries = []Binary{{OS: "linux", Arch: "amd64", Path: exe}, {OS: "linux", Arch: "arm64", Path: exe}}
	return opts
}

func TestSBOM(t *testing.T) {
	t.Parallel()
	opts := goBinaryOptions(t)
	sbom, err := SBOM(opts)
	require.NoError(t, err)
	again, err := SBOM(opts)
	require.NoError(t, err)
	assert.Equal(t, sbom, again, "the same binaries and commit give the same bytes")

	var doc struct {
		SPDXVersion  string `json:"spdxVersion"`
		CreationInfo struct {
			Created string `json:"created"`
		} `json:"creationInfo"`
		Packages []struct {
			Name      string `json:"name"`
			Version   string `json:"versionInfo"`
			Checksums []struct {
				Value string `json:"checksumValue"`
			} `json:"checksums"`
			ExternalRefs []struct {
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(sbom, &doc))
	assert.Equal(t, "SPDX-2.3", doc.SPDXVersion)
	assert.Equal(t, "2024-05-06T07:08:09Z", doc.CreationInfo.Created, "the commit time")
	listed := map[string]string{}
	for _, p := range doc.Packages {
		listed[p.Name] = p.Version
	}
	// What go build recorded in the binary, read independently of the code under test.
	info, err := buildinfo.ReadFile(opts.Binaries[0].Path)
	require.NoError(t, err)
	if len(info.Deps) == 0 {
		// Some test binaries record no modules; cmd/pkgsync's image test checks the real binary.
		t.Log("this test binary records no modules")
	}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		assert.Equal(t, dep.Version, listed[dep.Path], "module %s", dep.Path)
	}
	assert.Equal(t, "v1.2.3", listed[info.Main.Path])
	assert.Equal(t, info.GoVersion, listed["stdlib"])
	assert.Contains(t, listed, "pkgsync (linux/arm64)")

	t.Run("a binary without Go build information is refused", func(t *testing.T) {
		opts := testOptions(t)
		_, err := SBOM(opts)
		require.ErrorContains(t, err, "read the build information")
	})
}

func TestProvenanceStatement(t *testing.T) {
	t.Parallel()
	opts := goBinaryOptions(t)
	d := digest.FromString("index")
	p := Provenance{Subject: "ghcr.io/pkgsync/pkgsync", Digest: d.String(), Command: []string{"pkgsync", "image", "--version=v1.2.3"}}
	stmt, err := ProvenanceStatement(opts, p)
	require.NoError(t, err)
	again, err := ProvenanceStatement(opts, p)
	require.NoError(t, err)
	assert.Equal(t, stmt, again, "the same build gives the same bytes")
	assert.NotContains(t, string(stmt), filepath.Dir(opts.Binaries[0].Path), "no path of the build machine")

	var s struct {
		Type    string `json:"_type"`
		Subject []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		PredicateType string `json:"predicateType"`
		Predicate     struct {
			BuildDefinition struct {
				BuildType          string `json:"buildType"`
				ExternalParameters struct {
					Command []string `json:"command"`
					Source  struct {
						Revision string `json:"revision"`
					} `json:"source"`
				} `json:"externalParameters"`
				ResolvedDependencies []struct {
					Name   string            `json:"name"`
					URI    string            `json:"uri"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Builder struct {
					ID string `json:"id"`
				} `json:"builder"`
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	require.NoError(t, json.Unmarshal(stmt, &s))
	assert.Equal(t, "https://in-toto.io/Statement/v1", s.Type)
	assert.Equal(t, intoto.ProvenancePredicateType, s.PredicateType)
	require.Len(t, s.Subject, 1)
	assert.Equal(t, "ghcr.io/pkgsync/pkgsync", s.Subject[0].Name)
	assert.Equal(t, d.Encoded(), s.Subject[0].Digest["sha256"])
	assert.Equal(t, BuildType, s.Predicate.BuildDefinition.BuildType)
	assert.Equal(t, DefaultBuilderID, s.Predicate.RunDetails.Builder.ID)
	assert.Equal(t, p.Command, s.Predicate.BuildDefinition.ExternalParameters.Command)
	deps := s.Predicate.BuildDefinition.ResolvedDependencies
	require.NotEmpty(t, deps)
	assert.Equal(t, "git+https://github.com/pkgsync/pkgsync@"+opts.Revision, deps[0].URI)
	assert.Equal(t, opts.Revision, deps[0].Digest["gitCommit"])
	byName := map[string]map[string]string{}
	for _, dep := range deps {
		byName[dep.Name] = dep.Digest
	}
	info, err := buildinfo.ReadFile(opts.Binaries[0].Path)
	require.NoError(t, err)
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if assert.Contains(t, byName, dep.Path) && dep.Sum != "" {
			h, _ := dirHash(dep.Sum)
			assert.Equal(t, h, byName[dep.Path]["dirHash"], "module %s: its go.sum hash", dep.Path)
		}
	}

	_, err = ProvenanceStatement(opts, Provenance{Digest: "sha512:00"})
	require.ErrorContains(t, err, "is not sha256:HEX")
}

// The layout holds the attachments next to the image; it still loads as the image, and the
// same inputs give the same archive.
func TestWriteLayoutWithAttachments(t *testing.T) {
	t.Parallel()
	idx, err := Build(testOptions(t))
	require.NoError(t, err)
	d := digestOf(t, idx)
	size, err := idx.Size()
	require.NoError(t, err)
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.Digest(d.String()), Size: size}
	sbomStmt, err := intoto.SBOMStatement([]byte(`{"spdxVersion":"SPDX-2.3"}`), "pkgsync", d.String())
	require.NoError(t, err)
	write := func() []byte {
		attachments, err := Attachments(subject, []byte(`{"spdxVersion":"SPDX-2.3"}`), sbomStmt, created)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, WriteLayout(&buf, idx, "v1.2.3", attachments...))
		return buf.Bytes()
	}
	archive := write()
	assert.Equal(t, archive, write(), "byte for byte")
	file := filepath.Join(t.TempDir(), "image.tar")
	require.NoError(t, os.WriteFile(file, archive, 0o600))
	img, err := source.LoadLayout(t.Context(), file)
	require.NoError(t, err)
	assert.Equal(t, d.String(), img.Digest)
	require.Len(t, img.Attachments, 3, "pkgsync push pushes the attachments beside the image")
	var tags, types []string
	for _, a := range img.Attachments {
		tags = append(tags, a.Tag)
		types = append(types, a.Descriptor.ArtifactType)
		assert.NotEmpty(t, a.Blobs, "with its blobs")
	}
	assert.ElementsMatch(t, []string{"", "", strings.Replace(d.String(), ":", "-", 1) + ".sbom"}, tags)
	assert.ElementsMatch(t, []string{intoto.SPDXMediaType, intoto.MediaType, ""}, types)
}

// TestLoadLayoutRefusesAttachmentsOfAnotherImage: a layout whose attachments are about another
// digest than its image is refused, not pushed with the wrong subject.
func TestLoadLayoutRefusesAttachmentsOfAnotherImage(t *testing.T) {
	t.Parallel()
	idx, err := Build(testOptions(t))
	require.NoError(t, err)
	other := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromString("another image"), Size: 2}
	attachments, err := Attachments(other, []byte(`{"spdxVersion":"SPDX-2.3"}`), []byte(`{"_type":"x"}`), created)
	require.NoError(t, err)
	for name, kept := range map[string][]Attachment{"a referrer": attachments[:1], "a cosign tag": attachments[2:]} {
		var buf bytes.Buffer
		require.NoError(t, WriteLayout(&buf, idx, "v1.2.3", kept...))
		file := filepath.Join(t.TempDir(), "image.tar")
		require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o600))
		_, err := source.LoadLayout(t.Context(), file)
		assert.ErrorContains(t, err, "of another image than "+digestOf(t, idx).String()+": push one image at a time", name)
	}
}
