package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// Media types of pkgsync's own package images.
const (
	// ArtifactType is the artifactType of a pkgsync package image manifest.
	ArtifactType = "application/vnd.pkgsync.package.v1"
	// ConfigMediaType is the media type of its config blob.
	ConfigMediaType = "application/vnd.pkgsync.package.config.v1+json"
)

// Media types of the other formats a pull reads.
const (
	dockerManifestMediaType = "application/vnd.docker.distribution.manifest.v2+json"
	dockerListMediaType     = "application/vnd.docker.distribution.manifest.list.v2+json"
	dockerConfigMediaType   = "application/vnd.docker.container.image.v1+json"
	dockerLayerGzip         = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	dockerLayerTar          = "application/vnd.docker.image.rootfs.diff.tar"
)

const (
	// maxManifestBytes bounds manifests, as the registries themselves do (4 MiB).
	maxManifestBytes = 4 << 20
	// sharedPullTimeout bounds a pull that merged callers share: it runs on after the caller
	// that started it gives up, so that the others still get their result, and stops once none
	// waits. This bounds a pull that callers keep joining.
	sharedPullTimeout = 5 * time.Minute
)

// Format names the image format an artifact was read from.
type Format string

const (
	// FormatPkgsync is pkgsync's own OCI artifact: the package at the root of one layer.
	FormatPkgsync Format = "pkgsync"
	// FormatPackageOperator is a Package Operator (container) image: its layers hold the
	// package under package/, where render finds it.
	FormatPackageOperator Format = "package-operator"
)

// Artifact is a pulled, verified and unpacked package image. It is shared between callers
// through the cache: treat it, and the files of its FS, as read-only.
type Artifact struct {
	// Digest is the manifest digest.
	Digest string
	// Format is the image format the package was read from.
	Format Format
	// Annotations are the manifest annotations (org.opencontainers.image.*).
	Annotations map[string]string
	// FS holds the files of the image's layers as they are: the package at the root for
	// pkgsync's format, under package/ for Package Operator's (render reads either).
	FS fs.FS

	// size is what the artifact costs in the memory cache.
	size int64
}

// Size is the unpacked size of the package in bytes, plus a small overhead per file: what it
// costs to keep in memory.
func (a *Artifact) Size() int64 { return a.size }

// Pull returns the package that ref names. A tag is resolved first (one HEAD request).
//
// Pulls are cached per registry, repository and digest, in memory and, with Options.CacheDir,
// on disk; concurrent pulls of one share a single download. Digests are no secret, so cached
// content goes only to a caller whose own credentials the registry has let read that digest in
// that repository: the tag resolution says so, or else one HEAD request for the manifest. The
// answer is remembered per credential for Options.AccessTTL. A caller the registry refuses gets
// the error it would get with nothing cached.
func (c *Client) Pull(ctx context.Context, ref Reference, creds Credentials) (*Artifact, error) {
	dgst, _, err := c.resolveChain(ctx, ref, creds)
	if err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	ref = ref.WithDigest(dgst)
	// Before anything cached is looked at, and before joining a download that another caller
	// started with its own credentials. Cached content is keyed by ref as named, wherever it
	// was read from: the access is proved at a location of this caller's own reference.
	loc, cred, err := c.authorizeChain(ctx, ref, creds)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	// Proved only at the caller's own mirror: what is read from it is kept under the mirror's
	// name, as a registry of one's own is, and nothing kept under ref's name is served.
	name := ref
	if c.callerOnly(ref, loc) {
		name = loc
	}
	key := name.Content()
	if a := c.memory.get(key); a != nil {
		return a, nil
	}
	// The first caller's context values and credentials do the download; its cancellation does
	// not, so the callers merged into it are not failed by it. Once every caller has left, the
	// download stops.
	val, err := c.flight.do(ctx, key, sharedPullTimeout, func(ctx context.Context) (any, error) {
		if a := c.memory.get(key); a != nil {
			return a, nil
		}
		a, err := c.pull(ctx, name, loc, cred)
		if err != nil {
			return nil, err
		}
		c.memory.add(key, a)
		return a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return val.(*Artifact), nil
}

// manifestDoc holds the fields pkgsync reads from OCI and Docker schema2 manifests and indexes.
type manifestDoc struct {
	MediaType    string               `json:"mediaType"`
	ArtifactType string               `json:"artifactType"`
	Config       ocispec.Descriptor   `json:"config"`
	Layers       []ocispec.Descriptor `json:"layers"`
	Manifests    []ocispec.Descriptor `json:"manifests"`
	Annotations  map[string]string    `json:"annotations"`
}

// pull downloads from loc, verifies and unpacks the image ref.Digest names, reading what the
// cache directory holds for ref's repository (as named) instead of downloading it again. Every
// manifest and blob is checked against its digest, so a mirror cannot substitute content.
func (c *Client) pull(ctx context.Context, name, ref Reference, cred auth.Credential) (*Artifact, error) {
	repo := c.repositoryWith(ref, cred)
	disk := c.disk.forRepository(name)
	doc, err := c.fetchManifest(ctx, repo, disk, ref, digest.Digest(ref.Digest))
	if err != nil {
		return nil, err
	}
	if len(doc.Manifests) > 0 {
		// An index: package content does not depend on the platform, so any entry will do.
		// Take the first, as the registry lists it.
		doc, err = c.fetchManifest(ctx, repo, disk, ref, doc.Manifests[0].Digest)
		if err != nil {
			return nil, err
		}
		if len(doc.Manifests) > 0 {
			return nil, errors.New("nested image indexes are not supported")
		}
	}

	format, err := imageFormat(doc)
	if err != nil {
		return nil, err
	}
	if format == FormatPkgsync && len(doc.Layers) != 1 {
		return nil, fmt.Errorf("pkgsync package image has %d layers, want 1", len(doc.Layers))
	}
	// Sizes are not negative (fetchManifest checked), and the running total never exceeds the
	// limit, so the sum cannot overflow.
	var compressed int64
	for _, l := range doc.Layers {
		if l.Size > c.limits.MaxCompressedBytes-compressed {
			return nil, fmt.Errorf("%w: layer %s brings the layers over the limit of %d bytes compressed", ErrLimit, l.Digest, c.limits.MaxCompressedBytes)
		}
		compressed += l.Size
	}

	// What the files take is counted against the process's budget for pulls in flight, and
	// given back when this pull ends, however it ends.
	u := newUnpacker(c.limits)
	var reserved int64
	defer func() { c.pullBudget.release(reserved) }()
	u.reserve = func(n int64) error {
		if err := c.pullBudget.acquire(ctx, n); err != nil {
			return err
		}
		reserved += n
		return nil
	}
	for _, layer := range doc.Layers {
		gzipped, err := layerCompression(layer.MediaType)
		if err != nil {
			return nil, err
		}
		err = c.readBlob(ctx, repo, disk, layer, func(r io.Reader) error { return u.unpack(r, gzipped) })
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", layer.Digest, c.explain(ref, err))
		}
	}

	files := u.files
	return &Artifact{
		Digest:      ref.Digest,
		Format:      format,
		Annotations: doc.Annotations,
		FS:          files,
		size:        u.bytes + int64(len(files))*entryOverhead,
	}, nil
}

// imageFormat tells pkgsync artifacts from Package Operator (container) images.
func imageFormat(doc manifestDoc) (Format, error) {
	switch {
	case doc.ArtifactType == ArtifactType || doc.Config.MediaType == ConfigMediaType:
		return FormatPkgsync, nil
	case doc.Config.MediaType == ocispec.MediaTypeImageConfig || doc.Config.MediaType == dockerConfigMediaType:
		return FormatPackageOperator, nil
	}
	kind := doc.ArtifactType
	if kind == "" {
		kind = doc.Config.MediaType
	}
	return "", fmt.Errorf("image of type %q is not a package: want artifact type %s or a Package Operator (container) image",
		kind, ArtifactType)
}

// layerCompression tells whether a layer media type is gzip-compressed; other compressions
// (zstd) are not supported.
func layerCompression(mediaType string) (gzipped bool, err error) {
	switch mediaType {
	case ocispec.MediaTypeImageLayerGzip, dockerLayerGzip:
		return true, nil
	case ocispec.MediaTypeImageLayer, dockerLayerTar:
		return false, nil
	}
	return false, fmt.Errorf("layer media type %q is not supported: want %s or %s", mediaType, ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayer)
}

// fetchManifest reads a manifest or index by digest, from the cache directory or the registry,
// verifies it against the digest, and checks the sizes its descriptors declare.
func (c *Client) fetchManifest(ctx context.Context, repo *remote.Repository, disk *diskCache, ref Reference, dgst digest.Digest) (manifestDoc, error) {
	data, err := c.manifestBytes(ctx, repo, disk, ref, dgst)
	if err != nil {
		return manifestDoc{}, err
	}
	var doc manifestDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return manifestDoc{}, fmt.Errorf("decode manifest %s: %w", dgst, err)
	}
	switch doc.MediaType {
	case "", ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex, dockerManifestMediaType, dockerListMediaType:
	default:
		return manifestDoc{}, fmt.Errorf("manifest %s has unsupported media type %q", dgst, doc.MediaType)
	}
	// The registry stores what it is given: the sizes are the pusher's word.
	if err := checkSize("config", doc.Config, math.MaxInt64); err != nil {
		return manifestDoc{}, fmt.Errorf("manifest %s: %w", dgst, err)
	}
	for _, l := range doc.Layers {
		if err := checkSize("layer", l, math.MaxInt64); err != nil {
			return manifestDoc{}, fmt.Errorf("manifest %s: %w", dgst, err)
		}
	}
	for _, m := range doc.Manifests {
		if err := checkSize("manifest", m, maxManifestBytes); err != nil {
			return manifestDoc{}, fmt.Errorf("index %s: %w", dgst, err)
		}
	}
	return doc, nil
}

// checkSize rejects a descriptor that declares a negative size, or one over limit.
func checkSize(kind string, desc ocispec.Descriptor, limit int64) error {
	switch {
	case desc.Size < 0:
		return fmt.Errorf("%s %s declares %d bytes: %w", kind, desc.Digest, desc.Size, content.ErrInvalidDescriptorSize)
	case desc.Size > limit:
		return fmt.Errorf("%w: %s %s declares %d bytes, over %d", ErrLimit, kind, desc.Digest, desc.Size, limit)
	}
	return nil
}

func (c *Client) manifestBytes(ctx context.Context, repo *remote.Repository, disk *diskCache, ref Reference, dgst digest.Digest) ([]byte, error) {
	if disk != nil {
		if data, ok := cachedManifest(disk, dgst); ok {
			return data, nil
		}
	}
	desc, rc, err := repo.FetchReference(ctx, dgst.String())
	if err != nil {
		return nil, fmt.Errorf("fetch manifest: %w", c.explain(ref, err))
	}
	defer rc.Close()
	if desc.Size > maxManifestBytes {
		return nil, fmt.Errorf("%w: manifest %s is %d bytes, over %d", ErrLimit, dgst, desc.Size, maxManifestBytes)
	}
	data, err := content.ReadAll(rc, ocispec.Descriptor{Digest: dgst, Size: desc.Size})
	if err != nil {
		return nil, fmt.Errorf("fetch manifest %s: %w", dgst, err)
	}
	if disk != nil {
		if err := cacheBytes(disk, dgst, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// cachedManifest reads a manifest from the cache directory; a missing, oversized or corrupt
// file counts as a miss.
func cachedManifest(disk *diskCache, dgst digest.Digest) ([]byte, bool) {
	rc, err := disk.open(dgst)
	if err != nil || rc == nil {
		return nil, false
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil || len(data) > maxManifestBytes || digest.FromBytes(data) != dgst {
		return nil, false
	}
	return data, true
}

func cacheBytes(disk *diskCache, dgst digest.Digest, data []byte) error {
	f, commit, abort, err := disk.writer(dgst)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		abort()
		return fmt.Errorf("write cache file: %w", err)
	}
	return commit()
}

// readBlob streams a blob, from the cache directory (disk, nil for none) or the registry, to
// consume, then reads what consume left and verifies size and digest. An error from consume or
// from verification means the content must be discarded. Downloads are written to the cache
// directory once verified.
func (c *Client) readBlob(ctx context.Context, repo *remote.Repository, disk *diskCache, desc ocispec.Descriptor, consume func(io.Reader) error) error {
	var (
		rc  io.ReadCloser
		err error
	)
	if disk != nil {
		if rc, err = disk.open(desc.Digest); err != nil {
			return fmt.Errorf("open cached blob: %w", err)
		}
	}
	var commit func() error
	abort := func() {}
	if rc == nil {
		if rc, err = repo.Fetch(ctx, desc); err != nil {
			return err
		}
		if disk != nil {
			var f *os.File
			if f, commit, abort, err = disk.writer(desc.Digest); err != nil {
				rc.Close()
				return err
			}
			rc = readCloser{io.TeeReader(rc, f), rc}
		}
	}
	defer rc.Close()

	vr := content.NewVerifyReader(c.progress(rc, desc), desc)
	consumeErr := consume(vr)
	// Read what the consumer left (tar padding, the gzip trailer, or everything after a parse
	// error) so the digest covers every byte. The VerifyReader stops at the descriptor's size.
	_, drainErr := io.Copy(io.Discard, vr)
	verifyErr := drainErr
	if verifyErr == nil {
		verifyErr = vr.Verify()
	}
	switch {
	case verifyErr != nil:
		// A corrupt download explains a parse error too: report the root cause.
		abort()
		return fmt.Errorf("verify %s: %w", desc.Digest, verifyErr)
	case consumeErr != nil:
		abort()
		return consumeErr
	}
	if commit != nil {
		return commit()
	}
	return nil
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}
