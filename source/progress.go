package source

import (
	"context"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
)

// progress wraps r to tell Options.Progress how the transfer of desc goes, when the caller set it.
func (c *Client) progress(r io.Reader, desc ocispec.Descriptor) io.Reader {
	if c.opts.Progress == nil {
		return r
	}
	return &progressReader{r: r, notify: c.opts.Progress, p: Progress{Digest: desc.Digest.String(), Size: desc.Size}}
}

type progressReader struct {
	r      io.Reader
	notify func(Progress)
	p      Progress
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.p.Done += int64(n)
		p.notify(p.p)
	}
	return n, err
}

// progressSource tells Options.Progress the bytes a push reads from its source store.
type progressSource struct {
	oras.ReadOnlyTarget
	c *Client
}

func (s progressSource) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := s.ReadOnlyTarget.Fetch(ctx, desc)
	if err != nil || s.c.opts.Progress == nil {
		return rc, err
	}
	return readCloser{s.c.progress(rc, desc), rc}, nil
}
