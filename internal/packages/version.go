package packages

import (
	"k8s.io/utils/lru"

	"pkgsync.dev/pkgsync/source"
)

// imageVersionEntries bounds the image versions remembered: an entry is a repository, a digest
// and at most source.MaxVersionLength bytes of version, under 1 KiB.
const imageVersionEntries = 4096

// imageVersions remembers the version each pulled image declares (source.Artifact.Version), by
// content (source.Reference.Content: repository and digest), so that a Package whose render
// came from the render cache, and so pulled nothing, still shows the version: a fleet of
// members of one digest pulls it once. An image pulled before the entry was evicted shows none
// until it is pulled again; a Package keeps the version it reported for the same digest.
type imageVersions struct {
	cache *lru.Cache
}

func newImageVersions() *imageVersions {
	return &imageVersions{cache: lru.New(imageVersionEntries)}
}

// add records the version of content; "" (the image declares none fit to show) is recorded too.
func (v *imageVersions) add(content, version string) {
	if v != nil {
		v.cache.Add(content, version)
	}
}

// get returns the version of content, and whether it is known.
func (v *imageVersions) get(content string) (string, bool) {
	if v == nil {
		return "", false
	}
	got, ok := v.cache.Get(content)
	if !ok {
		return "", false
	}
	return got.(string), true
}

// packageVersion is the version of the revision ref names (pinned to a digest) for the status:
// with spec.semver the tag the range chose, otherwise what the image declares (pulled, or
// remembered from a pull), otherwise known: what the status says for the same digest.
func packageVersion(byRange bool, ref source.Reference, versions *imageVersions, known string) string {
	if byRange {
		return ref.Tag
	}
	if v, ok := versions.get(ref.Content()); ok {
		return v
	}
	return source.CleanVersion(known)
}
