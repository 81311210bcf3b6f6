package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
)

// What is stored beside an image rather than pulled: cosign's signature and attestation tags,
// the sigstore bundles among its referrers. source/signature reads and writes them with oras'
// repository, as the rest of source does, through the few primitives below, so that what the
// client decides (credentials, overrides and mirrors, token caches, transport and read bounds,
// error mapping) is decided here once.

// Repository returns the registry repository ref names as written (no override or mirror
// applies: writes go where the reference names), authenticated with the credential creds holds
// for its host (the client's default credentials when creds is nil), over the client's transport
// and token cache. It is for what is stored beside an image: its requests' errors go through
// Explain.
func (c *Client) Repository(ctx context.Context, ref Reference, creds Credentials) (*remote.Repository, error) {
	return c.repository(ctx, ref, creds)
}

// LocateRepository resolves ref (a tag at its locations, as Resolve does) and returns its
// digest, the location that serves that digest to this caller (as Locate names it) and that
// location's repository, authenticated with the credential creds holds for the location's host:
// where what is stored beside the image, its signatures, is read. A signature copied to a mirror
// verifies as it did at the source: it signs the digest, and trust policies match the reference
// as named.
func (c *Client) LocateRepository(ctx context.Context, ref Reference, creds Credentials) (string, Reference, *remote.Repository, error) {
	dgst, _, err := c.resolveChain(ctx, ref, creds)
	if err != nil {
		return "", Reference{}, nil, err
	}
	loc, cred, err := c.locate(ctx, ref.WithDigest(dgst), creds)
	if err != nil {
		return "", Reference{}, nil, err
	}
	return dgst, loc, c.repositoryWith(loc, cred), nil
}

// Explain turns the error of a request about ref, made with a Repository, into one that names
// the registry's answer and marks the causes callers give hints for (ErrAuthenticationRequired
// and the others), as every error of the client's own requests does.
func (c *Client) Explain(ref Reference, err error) error {
	return c.explain(ref, err)
}

// PushBlob uploads a blob to repo unless the registry has it.
func PushBlob(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, data []byte) error {
	ok, err := repo.Exists(ctx, desc)
	if err != nil || ok {
		return err
	}
	if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return nil
}

// FetchManifest downloads the manifest desc describes from repo, digest-checked, within the
// bound the client puts on every manifest it reads (4 MiB, as registries bound them); past it
// the error wraps ErrLimit.
func FetchManifest(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) ([]byte, error) {
	if desc.Size > maxManifestBytes {
		return nil, fmt.Errorf("manifest of %d bytes: %w (at most %d)", desc.Size, ErrLimit, maxManifestBytes)
	}
	data, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch manifest: %w", err)
	}
	return data, nil
}

// ListReferrers lists the referrers of the manifest subject names in repo whose artifact type
// is artifactType, a page at a time to fn. The registry decides how many there are: the listing
// reads at most maxPages pages (it sets repo's ReferrerListMaxPages) of at most pageBytes each,
// counted as the client's transport reads them; past either bound the error wraps ErrLimit.
func ListReferrers(ctx context.Context, repo *remote.Repository, subject digest.Digest, artifactType string, maxPages int, pageBytes int64, fn func([]ocispec.Descriptor) error) error {
	repo.ReferrerListMaxPages = maxPages
	listCtx := withReadBudget(ctx, &readBudget{what: "the referrers listing", perResponse: pageBytes, total: int64(maxPages) * pageBytes})
	err := repo.Referrers(listCtx, ocispec.Descriptor{Digest: subject}, artifactType, fn)
	if errors.Is(err, errdef.ErrTooManyPages) {
		err = fmt.Errorf("%w: %w", ErrLimit, err)
	}
	return err
}
