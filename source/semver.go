package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/Masterminds/semver/v3"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/lru"
)

const (
	// maxTags bounds the tags a listing reads; a repository with more is refused.
	maxTags = 10000
	// tagPageSize is the number of tags asked for per page of the tag list.
	tagPageSize = 1000
	// tagListEntries bounds the tag listings remembered.
	tagListEntries = 1024
)

// ErrNoMatchingVersion: no tag of the repository is a version the range accepts.
var ErrNoMatchingVersion = errors.New("no tag matches the version range")

// Tags lists the tags of ref's repository (its tag and digest are ignored), following the
// registry's pages, at most 10000.
func (c *Client) Tags(ctx context.Context, ref Reference, creds Credentials) ([]string, error) {
	return c.TagsWithin(ctx, ref, creds, 0)
}

// TagsWithin is Tags, reusing a listing of the same repository with the same credentials that
// is younger than maxAge; zero maxAge always asks the registry. Concurrent listings of one
// repository and credential share one, as ResolveWithin does for tags, so any number of
// resources following one repository cost one listing per interval. The returned slice is
// shared: do not change it.
func (c *Client) TagsWithin(ctx context.Context, ref Reference, creds Credentials, maxAge time.Duration) ([]string, error) {
	cred, err := c.credential(ctx, ref.Registry, creds)
	if err != nil {
		return nil, fmt.Errorf("list tags of %s: %w", ref.Name(), err)
	}
	key := ref.Name() + "\x00" + credentialKey(ref.Registry, cred)
	rc := c.tagLists
	if maxAge > 0 {
		if v, ok := rc.entries.Get(key); ok {
			if l := v.(tagList); rc.now().Sub(l.at) < maxAge {
				return l.tags, nil
			}
		}
	}
	shared := context.WithoutCancel(ctx)
	result := rc.flight.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(shared, sharedResolveTimeout)
		defer cancel()
		started := rc.now()
		repo := c.repositoryWith(ref, cred)
		repo.TagListPageSize = rc.pageSize
		var tags []string
		err := repo.Tags(ctx, "", func(page []string) error {
			if len(tags)+len(page) > rc.maxTags {
				return fmt.Errorf("more than %d tags: %w", rc.maxTags, ErrLimit)
			}
			tags = append(tags, page...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list tags of %s: %w", ref.Name(), c.explain(Reference{Registry: ref.Registry, Repository: ref.Repository}, err))
		}
		rc.entries.Add(key, tagList{tags: tags, at: started})
		return tags, nil
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("list tags of %s: %w", ref.Name(), ctx.Err())
	case res := <-result:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.([]string), nil
	}
}

// tagListCache remembers when each repository's tags were last listed, per credential, and
// merges concurrent listings of one repository.
type tagListCache struct {
	entries  *lru.Cache // of tagList, keyed by repository and credential
	flight   singleflight.Group
	now      func() time.Time
	pageSize int
	maxTags  int
}

type tagList struct {
	tags []string
	at   time.Time
}

func newTagListCache() *tagListCache {
	return &tagListCache{entries: lru.New(tagListEntries), now: time.Now, pageSize: tagPageSize, maxTags: maxTags}
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
