package source

import (
	"bytes"
	"context"
	"fmt"

	"oras.land/oras-go/v2"
)

// Push uploads img to every reference in refs; each names a tag, a digest, or both. Blobs the
// registry already has are not uploaded again. It returns the references, pinned to the digest.
func (c *Client) Push(ctx context.Context, img *Image, refs []Reference, creds Credentials) ([]Reference, error) {
	pushed := make([]Reference, 0, len(refs))
	for _, ref := range refs {
		if ref.Digest != "" && ref.Digest != img.Digest {
			return pushed, fmt.Errorf("push %s: the reference pins %s, but the image is %s", ref, ref.Digest, img.Digest)
		}
		repo, err := c.repository(ctx, ref, creds)
		if err != nil {
			return pushed, fmt.Errorf("push %s: %w", ref, err)
		}
		// oras copies the graph: blobs first, each skipped when the registry has it, then the
		// manifest by digest.
		opts := oras.DefaultCopyGraphOptions
		if err := oras.CopyGraph(ctx, progressSource{img.store, c}, repo, img.desc, opts); err != nil {
			return pushed, fmt.Errorf("push %s: %w", ref, c.explain(ref, err))
		}
		if ref.Tag != "" {
			if err := repo.PushReference(ctx, img.desc, bytes.NewReader(img.manifest), ref.Tag); err != nil {
				return pushed, fmt.Errorf("push %s: tag: %w", ref, c.explain(ref, err))
			}
		}
		pushed = append(pushed, ref.WithDigest(img.Digest))
	}
	return pushed, nil
}
