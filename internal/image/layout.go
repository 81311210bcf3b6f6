package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// blob is one content-addressed file of the layout.
type blob struct {
	digest v1.Hash
	open   func() (io.ReadCloser, error)
}

// WriteLayout writes idx as an OCI image layout in a tar archive: oci-layout, an index.json
// naming idx (with org.opencontainers.image.ref.name refName when not empty), and every blob
// under blobs/sha256, sorted by digest, with fixed owners, modes and timestamps. The same index
// gives the same archive, byte for byte. `pkgsync push`, skopeo (oci-archive:) and podman load
// read it.
//
// Attachments (the SBOM and provenance) follow the index in index.json: a referrer with its
// artifactType, one under a cosign tag with that tag as its ref name; their manifests and blobs
// join the others.
func WriteLayout(w io.Writer, idx v1.ImageIndex, refName string, attachments ...Attachment) error {
	fail := func(err error) error { return fmt.Errorf("write layout: %w", err) }
	blobs, err := indexBlobs(idx)
	if err != nil {
		return fail(err)
	}
	d, err := idx.Digest()
	if err != nil {
		return fail(err)
	}
	size, err := idx.Size()
	if err != nil {
		return fail(err)
	}
	root := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.Digest(d.String()), Size: size}
	if refName != "" {
		root.Annotations = map[string]string{ocispec.AnnotationRefName: refName}
	}
	manifests := []ocispec.Descriptor{root}
	for _, a := range attachments {
		desc := a.Descriptor
		if a.Tag != "" {
			desc.Annotations = map[string]string{ocispec.AnnotationRefName: a.Tag}
		}
		manifests = append(manifests, desc)
		blobs = addBlob(blobs, v1.Hash{Algorithm: desc.Digest.Algorithm().String(), Hex: desc.Digest.Encoded()}, a.Manifest)
		for d, data := range a.Blobs {
			blobs = addBlob(blobs, v1.Hash{Algorithm: d.Algorithm().String(), Hex: d.Encoded()}, data)
		}
	}
	slices.SortFunc(blobs, func(a, b blob) int { return strings.Compare(a.digest.String(), b.digest.String()) })
	indexJSON, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: manifests,
	})
	if err != nil {
		return fail(err)
	}
	layoutJSON, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return fail(err)
	}

	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, f := range []file{
		{name: ocispec.ImageLayoutFile, mode: 0o644, modTime: epoch, data: layoutJSON},
		{name: ocispec.ImageIndexFile, mode: 0o644, modTime: epoch, data: indexJSON},
		{name: "blobs/", mode: 0o755, modTime: epoch},
		{name: "blobs/sha256/", mode: 0o755, modTime: epoch},
	} {
		if err := writeEntry(tw, f); err != nil {
			return fail(err)
		}
	}
	for _, b := range blobs {
		if err := writeBlob(tw, b, epoch); err != nil {
			return fail(fmt.Errorf("blob %s: %w", b.digest, err))
		}
	}
	if err := tw.Close(); err != nil {
		return fail(err)
	}
	return nil
}

// addBlob adds data to blobs unless its digest is there.
func addBlob(blobs []blob, d v1.Hash, data []byte) []blob {
	for _, b := range blobs {
		if b.digest == d {
			return blobs
		}
	}
	return append(blobs, blob{digest: d, open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }})
}

func writeBlob(tw *tar.Writer, b blob, modTime time.Time) error {
	rc, err := b.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	return writeEntry(tw, file{name: "blobs/" + b.digest.Algorithm + "/" + b.digest.Hex, mode: 0o644, modTime: modTime, data: data})
}

// indexBlobs lists the index manifest and, for each image, its manifest, config and layers,
// each once, sorted by digest.
func indexBlobs(idx v1.ImageIndex) ([]blob, error) {
	byDigest := map[v1.Hash]blob{}
	add := func(d v1.Hash, open func() (io.ReadCloser, error)) { byDigest[d] = blob{digest: d, open: open} }
	raw := func(get func() ([]byte, error)) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) {
			data, err := get()
			if err != nil {
				return nil, err
			}
			return io.NopCloser(bytes.NewReader(data)), nil
		}
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	add(d, raw(idx.RawManifest))
	manifest, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range manifest.Manifests {
		if desc.MediaType != types.OCIManifestSchema1 {
			return nil, fmt.Errorf("manifest %s: media type %s is not an OCI image manifest", desc.Digest, desc.MediaType)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		add(desc.Digest, raw(img.RawManifest))
		configDigest, err := img.ConfigName()
		if err != nil {
			return nil, err
		}
		add(configDigest, raw(img.RawConfigFile))
		layers, err := img.Layers()
		if err != nil {
			return nil, err
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				return nil, err
			}
			add(d, l.Compressed)
		}
	}
	blobs := slices.Collect(maps.Values(byDigest))
	slices.SortFunc(blobs, func(a, b blob) int { return strings.Compare(a.digest.String(), b.digest.String()) })
	return blobs, nil
}
