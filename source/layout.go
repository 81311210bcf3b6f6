package source

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/oci"
)

// WriteLayout writes img as an OCI image layout in a tar archive, with one index entry per tag
// (org.opencontainers.image.ref.name), or one untagged entry when tags is empty.
//
// The archive is written here instead of through oras' oci.Store, which writes a directory and
// orders index.json by map iteration; this archive is byte-for-byte reproducible.
func (img *Image) WriteLayout(ctx context.Context, w io.Writer, tags []string) error {
	blobs, err := graph(ctx, img.store, img.desc)
	if err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	tags = slices.Sorted(slices.Values(tags))
	tags = slices.Compact(tags)
	for _, tag := range tags {
		desc := img.desc
		desc.Annotations = map[string]string{ocispec.AnnotationRefName: tag}
		index.Manifests = append(index.Manifests, desc)
	}
	if len(tags) == 0 {
		index.Manifests = []ocispec.Descriptor{img.desc}
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	layoutJSON, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	entry := func(name string, data []byte) error {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			hdr.Mode, hdr.Size, hdr.Typeflag = 0o755, 0, tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := entry(ocispec.ImageLayoutFile, layoutJSON); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	if err := entry(ocispec.ImageIndexFile, indexJSON); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	dirs := map[string]bool{}
	for _, desc := range blobs {
		dir := "blobs/" + desc.Digest.Algorithm().String() + "/"
		for _, d := range []string{"blobs/", dir} {
			if !dirs[d] {
				dirs[d] = true
				if err := entry(d, nil); err != nil {
					return fmt.Errorf("write layout: %w", err)
				}
			}
		}
		data, err := content.FetchAll(ctx, img.store, desc)
		if err != nil {
			return fmt.Errorf("write layout: read %s: %w", desc.Digest, err)
		}
		if err := entry(dir+desc.Digest.Encoded(), data); err != nil {
			return fmt.Errorf("write layout: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	return nil
}

// cosignAttachmentTag matches the tags cosign stores an image's signatures and attachments under.
var cosignAttachmentTag = regexp.MustCompile(`^sha256-[0-9a-f]{64}\.(sig|att|sbom)$`)

// isAttachment says whether an index.json entry is an attachment of an image rather than one:
// a manifest under a cosign tag, or a referrer (an untagged manifest with a subject). Package
// images carry an artifact type too, so the subject decides.
func isAttachment(ctx context.Context, store content.Fetcher, desc ocispec.Descriptor) (bool, error) {
	name := desc.Annotations[ocispec.AnnotationRefName]
	if cosignAttachmentTag.MatchString(name) {
		return true, nil
	}
	if name != "" || desc.MediaType != ocispec.MediaTypeImageManifest {
		return false, nil
	}
	if desc.Size > maxManifestBytes {
		return false, fmt.Errorf("%w: manifest %s is %d bytes", ErrLimit, desc.Digest, desc.Size)
	}
	data, err := content.FetchAll(ctx, store, desc)
	if err != nil {
		return false, fmt.Errorf("read manifest %s: %w", desc.Digest, err)
	}
	var m struct {
		Subject *ocispec.Descriptor `json:"subject"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return false, fmt.Errorf("decode manifest %s: %w", desc.Digest, err)
	}
	return m.Subject != nil, nil
}

// graph lists root and everything it references, sorted by digest, each once.
func graph(ctx context.Context, fetcher content.Fetcher, root ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	seen := map[string]bool{}
	var out []ocispec.Descriptor
	queue := []ocispec.Descriptor{root}
	for len(queue) > 0 {
		desc := queue[0]
		queue = queue[1:]
		if seen[desc.Digest.String()] {
			continue
		}
		seen[desc.Digest.String()] = true
		out = append(out, desc)
		next, err := content.Successors(ctx, fetcher, desc)
		if err != nil {
			return nil, err
		}
		queue = append(queue, next...)
	}
	slices.SortFunc(out, func(a, b ocispec.Descriptor) int { return strings.Compare(a.Digest.String(), b.Digest.String()) })
	return out, nil
}

// LoadLayout reads an OCI image layout tar archive holding one image (under any number of
// tags), such as WriteLayout writes. Attachments listed beside it (the SBOM and provenance the
// release image carries: referrers, manifests with a subject, and manifests under cosign's
// sha256-HEX.sbom, .att or .sig tags) are not the image: they are read into its Attachments,
// and refused when they are about another digest.
func LoadLayout(ctx context.Context, file string) (*Image, error) {
	fail := func(err error) (*Image, error) { return nil, fmt.Errorf("load %s: %w", file, err) }
	index, err := readLayoutIndex(file)
	if err != nil {
		return fail(err)
	}
	// oras reads the blobs; it checks the layout version and serves content by digest.
	store, err := oci.NewFromTar(ctx, file)
	if err != nil {
		return fail(err)
	}
	var root *ocispec.Descriptor
	var attachments []ocispec.Descriptor
	for i, desc := range index.Manifests {
		attachment, err := isAttachment(ctx, store, desc)
		if err != nil {
			return fail(err)
		}
		if attachment {
			attachments = append(attachments, desc)
			continue
		}
		if root != nil && root.Digest != desc.Digest {
			return fail(errors.New("the layout holds more than one image; push one at a time"))
		}
		root = &index.Manifests[i]
	}
	if root == nil {
		return fail(errors.New("the layout's index.json lists no image"))
	}
	desc := *root
	desc.Annotations = nil
	if desc.Size > maxManifestBytes {
		return fail(fmt.Errorf("%w: manifest is %d bytes", ErrLimit, desc.Size))
	}
	manifest, err := content.FetchAll(ctx, store, desc)
	if err != nil {
		return fail(fmt.Errorf("read manifest %s: %w", desc.Digest, err))
	}
	var doc manifestDoc
	if err := json.Unmarshal(manifest, &doc); err != nil {
		return fail(fmt.Errorf("decode manifest %s: %w", desc.Digest, err))
	}
	img := &Image{
		Digest:   desc.Digest.String(),
		Name:     doc.Annotations[ocispec.AnnotationTitle],
		Version:  doc.Annotations[ocispec.AnnotationVersion],
		manifest: manifest,
		desc:     desc,
		store:    store,
	}
	for _, a := range attachments {
		att, err := readAttachment(ctx, store, a, desc.Digest)
		if err != nil {
			return fail(err)
		}
		img.Attachments = append(img.Attachments, att)
	}
	return img, nil
}

// maxAttachmentBlobBytes bounds each blob of an attachment read from a layout (an SBOM of
// every module linked into a binary is well under 1 MiB).
const maxAttachmentBlobBytes = 16 << 20

// readAttachment reads the attachment desc of a layout, with its blobs, and checks that it is
// about subject: a referrer's subject, or the digest a cosign tag names.
func readAttachment(ctx context.Context, store content.Fetcher, desc ocispec.Descriptor, subject digest.Digest) (Attachment, error) {
	tag := desc.Annotations[ocispec.AnnotationRefName]
	if desc.Size > maxManifestBytes {
		return Attachment{}, fmt.Errorf("%w: attachment manifest %s is %d bytes", ErrLimit, desc.Digest, desc.Size)
	}
	data, err := content.FetchAll(ctx, store, desc)
	if err != nil {
		return Attachment{}, fmt.Errorf("read attachment %s: %w", desc.Digest, err)
	}
	var m struct {
		Config  *ocispec.Descriptor  `json:"config"`
		Layers  []ocispec.Descriptor `json:"layers"`
		Subject *ocispec.Descriptor  `json:"subject"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return Attachment{}, fmt.Errorf("decode attachment %s: %w", desc.Digest, err)
	}
	switch {
	case tag != "":
		if want := strings.Replace(subject.String(), ":", "-", 1) + "."; !strings.HasPrefix(tag, want) {
			return Attachment{}, fmt.Errorf("the layout holds %s, an attachment of another image than %s: push one image at a time", tag, subject)
		}
	case m.Subject == nil || m.Subject.Digest != subject:
		return Attachment{}, fmt.Errorf("the layout holds the referrer %s of another image than %s: push one image at a time", desc.Digest, subject)
	}
	out := Attachment{Tag: tag, Manifest: data, Descriptor: ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, ArtifactType: desc.ArtifactType},
		Blobs: map[digest.Digest][]byte{}}
	blobs := m.Layers
	if m.Config != nil {
		blobs = append(blobs, *m.Config)
	}
	for _, b := range blobs {
		if b.Size > maxAttachmentBlobBytes {
			return Attachment{}, fmt.Errorf("%w: blob %s of attachment %s is %d bytes, over %d", ErrLimit, b.Digest, desc.Digest, b.Size, maxAttachmentBlobBytes)
		}
		data, err := content.FetchAll(ctx, store, b)
		if err != nil {
			return Attachment{}, fmt.Errorf("read blob %s of attachment %s: %w", b.Digest, desc.Digest, err)
		}
		out.Blobs[b.Digest] = data
	}
	return out, nil
}

// readLayoutIndex reads index.json from a layout archive.
func readLayoutIndex(file string) (ocispec.Index, error) {
	f, err := os.Open(file)
	if err != nil {
		return ocispec.Index{}, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return ocispec.Index{}, fmt.Errorf("no %s: not an OCI image layout archive", ocispec.ImageIndexFile)
		}
		if err != nil {
			return ocispec.Index{}, fmt.Errorf("read tar: %w", err)
		}
		if path.Clean(hdr.Name) != ocispec.ImageIndexFile {
			continue
		}
		var index ocispec.Index
		if err := json.NewDecoder(io.LimitReader(tr, maxManifestBytes)).Decode(&index); err != nil {
			return ocispec.Index{}, fmt.Errorf("decode %s: %w", ocispec.ImageIndexFile, err)
		}
		return index, nil
	}
}
