package source

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Attachment is a manifest to push beside an image, with its blobs: a referrer (pushed by digest;
// its subject names the image) or a manifest under a tag.
type Attachment struct {
	// Tag, when not empty, is the tag it is pushed under.
	Tag string
	// Manifest is the manifest's content and Descriptor describes it.
	Manifest   []byte
	Descriptor ocispec.Descriptor
	// Blobs are the blobs the manifest references.
	Blobs map[digest.Digest][]byte
}

// PushAttachments pushes attachments to the repository ref names (its tag or digest do not
// count): blobs first, then each manifest, by tag or, for a referrer, by digest (oras maintains
// the referrers tag schema on registries without the referrers API).
func (c *Client) PushAttachments(ctx context.Context, ref Reference, attachments []Attachment, creds Credentials) error {
	repo, err := c.repository(ctx, ref, creds)
	if err != nil {
		return fmt.Errorf("push attachments to %s: %w", ref.Name(), err)
	}
	for _, a := range attachments {
		digests := make([]digest.Digest, 0, len(a.Blobs))
		for d := range a.Blobs {
			digests = append(digests, d)
		}
		slices.Sort(digests)
		for _, d := range digests {
			data := a.Blobs[d]
			if err := PushBlob(ctx, repo, ocispec.Descriptor{MediaType: "application/octet-stream", Digest: d, Size: int64(len(data))}, data); err != nil {
				return fmt.Errorf("push attachment %s: blob %s: %w", a.Descriptor.Digest, d, c.explain(ref, err))
			}
		}
		if a.Tag != "" {
			err = repo.PushReference(ctx, a.Descriptor, bytes.NewReader(a.Manifest), a.Tag)
		} else {
			err = repo.Push(ctx, a.Descriptor, bytes.NewReader(a.Manifest))
		}
		if err != nil {
			return fmt.Errorf("push attachment %s: %w", a.Descriptor.Digest, c.explain(ref, err))
		}
	}
	return nil
}
