package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"k8s.io/utils/lru"
	"oras.land/oras-go/v2/errdef"
)

// Bounds of a tag listing. A registry answers for its own listing, and a registry may be run by
// whoever may create a Package: with the count alone bounded, pages of one 4 MiB tag each once
// drove the controller to 12 GiB. Each bound answers one way of making a listing large: long
// tags (the count is bounded), many pages (each page is), padded pages (the total is).
const (
	// maxTags bounds the tags a listing reads; a repository with more is refused.
	maxTags = 10000
	// maxTagLength is the distribution spec's bound on a tag ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}):
	// a longer one is refused as the page that holds it is read.
	maxTagLength = 128
	// maxTagPages bounds the pages of one listing: ten tags a page on average, at maxTags.
	maxTagPages = 1000
	// maxTagPageBytes bounds one page as read: oras' own bound (Repository.MaxMetadataBytes),
	// counted by us so that the error names it rather than a truncated JSON document.
	maxTagPageBytes = 4 << 20
	// maxTagListBytes bounds what one listing reads in all, pages, token and error responses
	// together: maxTags tags of maxTagLength take 1.3 MB of JSON; registries that add metadata
	// to each tag (gcr.io) take more.
	maxTagListBytes = 16 << 20
	// tagPageSize is the number of tags asked for per page of the tag list.
	tagPageSize = 1000
	// tagListEntries and tagListBytes bound the tag listings remembered: maxTags tags of
	// maxTagLength are 1.4 MB, so the number of entries alone would allow 1.4 GB.
	tagListEntries = 1024
	tagListBytes   = 16 << 20
)

// ErrNoMatchingVersion: no tag of the repository is a version the range accepts.
var ErrNoMatchingVersion = errors.New("no tag matches the version range")

// Tags lists the tags of ref's repository (its tag and digest are ignored), following the
// registry's pages. A listing past a bound (10000 tags, a tag over 128 characters, 1000 pages,
// a page over 4 MiB, 16 MiB in all) is refused with an error wrapping ErrLimit that names it.
func (c *Client) Tags(ctx context.Context, ref Reference, creds Credentials) ([]string, error) {
	return c.TagsWithin(ctx, ref, creds, 0)
}

// TagsWithin is Tags, reusing a listing of the same repository with the same credentials that
// is younger than maxAge; zero maxAge always asks the registry. Concurrent listings of one
// repository and credential share one, as ResolveWithin does for tags, so any number of
// resources following one repository cost one listing per interval. The returned slice is
// shared: do not change it.
func (c *Client) TagsWithin(ctx context.Context, ref Reference, creds Credentials, maxAge time.Duration) ([]string, error) {
	// Listed through tag mirrors: a listing is the repository's tags. Remembered per location
	// and credential of each (chainKey), not the source's alone.
	chain, err := c.chainKey(ctx, ref, byTag, creds)
	if err != nil {
		return nil, fmt.Errorf("list tags of %s: %w", ref.Name(), err)
	}
	key := ref.Name() + "\x00" + chain
	rc := c.tagLists
	if maxAge > 0 {
		if l, ok := rc.get(key); ok && rc.now().Sub(l.at) < maxAge {
			return l.tags, nil
		}
	}
	val, err := rc.flight.do(ctx, key, sharedResolveTimeout, func(ctx context.Context) (any, error) {
		started := rc.now()
		locs := c.locationsOf(ref, byTag)
		var errs []error
		for _, loc := range locs {
			tags, err := c.listTags(ctx, loc, creds)
			if err == nil {
				rc.add(key, tagList{tags: tags, at: started})
				return tags, nil
			}
			if ctx.Err() != nil {
				return nil, err
			}
			errs = append(errs, err)
		}
		return nil, tried(ref, locs, errs)
	})
	switch {
	case err == nil:
		return val.([]string), nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("list tags of %s: %w", ref.Name(), err)
	}
	return nil, err
}

// listTags lists the tags of loc's repository, within the listing's bounds.
func (c *Client) listTags(ctx context.Context, loc Reference, creds Credentials) ([]string, error) {
	rc := c.tagLists
	cred, err := c.credential(ctx, loc.Registry, creds)
	if err != nil {
		return nil, fmt.Errorf("list tags of %s: %w", loc.Name(), err)
	}
	ctx = withReadBudget(ctx, &readBudget{what: "the tag listing", perResponse: rc.pageBytes, total: rc.listBytes})
	repo := c.repositoryWith(loc, cred)
	repo.TagListPageSize = rc.pageSize
	repo.TagListMaxPages = rc.maxPages
	// One byte over ours, so that our bound, which names itself, is met first.
	repo.MaxMetadataBytes = rc.pageBytes + 1
	var tags []string
	err = repo.Tags(ctx, "", func(page []string) error {
		if len(tags)+len(page) > rc.maxTags {
			return fmt.Errorf("more than %d tags: %w", rc.maxTags, ErrLimit)
		}
		for _, tag := range page {
			if len(tag) > maxTagLength {
				return fmt.Errorf("%w: a tag of %d characters, over %d (the distribution spec's bound)", ErrLimit, len(tag), maxTagLength)
			}
		}
		tags = append(tags, page...)
		return nil
	})
	if errors.Is(err, errdef.ErrTooManyPages) {
		err = fmt.Errorf("%w: %w", ErrLimit, err)
	}
	if err != nil {
		return nil, fmt.Errorf("list tags of %s: %w", loc.Name(), c.explain(Reference{Registry: loc.Registry, Repository: loc.Repository}, err))
	}
	return tags, nil
}

// tagListCache remembers when each repository's tags were last listed, per credential, and
// merges concurrent listings of one repository. It is bounded in entries and in bytes.
type tagListCache struct {
	flight flightGroup
	now    func() time.Time

	// The bounds of a listing, fields so that tests can lower them.
	pageSize, maxTags, maxPages int
	pageBytes, listBytes        int64

	mu       sync.Mutex
	entries  *lru.Cache // of tagList, keyed by repository and credential
	bytes    int64      // the tagListSize of the entries
	maxBytes int64
}

type tagList struct {
	tags []string
	at   time.Time
}

func newTagListCache() *tagListCache {
	c := &tagListCache{
		now: time.Now, pageSize: tagPageSize, maxTags: maxTags, maxPages: maxTagPages,
		pageBytes: maxTagPageBytes, listBytes: maxTagListBytes, maxBytes: tagListBytes,
	}
	// Called by the lru under c.mu: every call that can evict (Add, Remove, RemoveOldest) is
	// made holding it.
	c.entries = lru.NewWithEvictionFunc(tagListEntries, func(key lru.Key, value any) {
		c.bytes -= tagListSize(key.(string), value.(tagList).tags)
	})
	return c
}

// tagListSize is what a listing costs in memory, roughly: the strings, their headers, the key.
func tagListSize(key string, tags []string) int64 {
	size := int64(len(key)) + 128
	for _, t := range tags {
		size += int64(len(t)) + 16
	}
	return size
}

func (c *tagListCache) get(key string) (tagList, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.entries.Get(key)
	if !ok {
		return tagList{}, false
	}
	return v.(tagList), true
}

// add remembers l under key, letting the least recently used listings go while the cache holds
// more than its bytes. A listing larger than the whole cache is not remembered.
func (c *tagListCache) add(key string, l tagList) {
	size := tagListSize(key, l.tags)
	c.mu.Lock()
	defer c.mu.Unlock()
	// The lru replaces a value without evicting it: remove it first, so that it is uncounted.
	c.entries.Remove(key)
	if size > c.maxBytes {
		return
	}
	c.entries.Add(key, l)
	c.bytes += size
	for c.bytes > c.maxBytes && c.entries.Len() > 0 {
		c.entries.RemoveOldest()
	}
}

// VersionRange is a parsed semantic version range: ">=1.4.0 <2.0.0", "~1.4", "^1", "1.x".
type VersionRange struct {
	text        string
	constraints *semver.Constraints
}

// ParseVersionRange parses a range in the syntax of github.com/Masterminds/semver: comparisons
// separated by spaces or commas are all required, "||" separates alternatives.
func ParseVersionRange(s string) (*VersionRange, error) {
	cs, err := semver.NewConstraint(s)
	if err != nil {
		return nil, fmt.Errorf("version range %q: %w", s, err)
	}
	return &VersionRange{text: s, constraints: cs}, nil
}

// String is the range as given.
func (r *VersionRange) String() string { return r.text }

// Highest returns the tag of the highest version in tags that the range accepts. Tags that are
// not versions (latest, sha256-....sig) are skipped; a leading v is allowed (v1.2.3).
// Pre-releases (1.5.0-rc.1) count only when the range names a pre-release itself, as in
// ">=1.5.0-0". Of tags naming one version (1.2.3 and v1.2.3) the first in tags wins.
func (r *VersionRange) Highest(tags []string) (string, bool) {
	var (
		best    *semver.Version
		bestTag string
	)
	for _, tag := range tags {
		v, err := semver.NewVersion(tag)
		if err != nil || !r.constraints.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestTag = v, tag
		}
	}
	return bestTag, best != nil
}

// ResolveVersion lists the tags of ref's repository (shared within maxAge, as TagsWithin does),
// picks the highest the range accepts and resolves it (as ResolveWithin does). It returns ref
// with that tag and its digest. No matching tag is ErrNoMatchingVersion, naming the tags seen.
func (c *Client) ResolveVersion(ctx context.Context, ref Reference, r *VersionRange, creds Credentials, maxAge time.Duration) (Reference, error) {
	tags, err := c.TagsWithin(ctx, ref, creds, maxAge)
	if err != nil {
		return Reference{}, err
	}
	tag, ok := r.Highest(tags)
	if !ok {
		return Reference{}, fmt.Errorf("%s: %w %q (%s)", ref.Name(), ErrNoMatchingVersion, r, describeTags(tags))
	}
	chosen := Reference{Registry: ref.Registry, Repository: ref.Repository, Tag: tag}
	dgst, err := c.ResolveWithin(ctx, chosen, creds, maxAge)
	if err != nil {
		return Reference{}, err
	}
	return chosen.WithDigest(dgst), nil
}

// describeTags names a few of the version tags seen, for a message.
func describeTags(tags []string) string {
	var versions []*semver.Version
	for _, t := range tags {
		if v, err := semver.NewVersion(t); err == nil {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return fmt.Sprintf("%d tags, none a semantic version", len(tags))
	}
	slices.SortFunc(versions, func(a, b *semver.Version) int { return b.Compare(a) })
	shown := versions[:min(len(versions), 5)]
	names := make([]string, len(shown))
	for i, v := range shown {
		names[i] = v.Original()
	}
	return fmt.Sprintf("%d version tags, the highest %v", len(versions), names)
}
