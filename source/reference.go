package source

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"
)

// Reference names an image in a registry by tag, by digest, or by both (repo:tag@sha256:...).
type Reference struct {
	// Registry is the registry host, with an optional port: registry.example.com, 127.0.0.1:5000.
	Registry string
	// Repository is the repository path inside the registry: team/package.
	Repository string
	// Tag is the tag, if any.
	Tag string
	// Digest is the manifest digest, if any. When set it wins over Tag.
	Digest string
}

// ParseReference parses REGISTRY/REPOSITORY[:TAG][@DIGEST]. The registry host is required:
// pkgsync does not guess a default registry.
func ParseReference(s string) (Reference, error) {
	name, dgst, pinned := strings.Cut(s, "@")
	var ref Reference
	if pinned {
		d, err := digest.Parse(dgst)
		if err != nil {
			return Reference{}, fmt.Errorf("parse reference %q: invalid digest %q: %w", s, dgst, err)
		}
		ref.Digest = d.String()
	}
	// oras parses the name part; it would drop a tag that comes with a digest, which is why the
	// digest is cut off first.
	parsed, err := registry.ParseReference(name)
	if err != nil {
		return Reference{}, fmt.Errorf("parse reference %q: %w (%s)", s, err, referenceHint(s))
	}
	ref.Registry, ref.Repository, ref.Tag = parsed.Registry, parsed.Repository, parsed.Reference
	return ref, nil
}

// referenceHint says what is wrong in a reference oras refused: the part at fault, since
// "invalid reference" alone does not tell a missing host from a repository in upper case.
func referenceHint(s string) string {
	host, path, ok := strings.Cut(s, "/")
	if !ok || host == "" {
		return "a reference names the registry host, for example registry.example.com/team/package:v1"
	}
	name, pin, _ := strings.Cut(path, "@")
	if pin != "" {
		pin = "@" + pin
	}
	repo, tag := name, ""
	if i := strings.LastIndex(name, ":"); i >= 0 {
		repo, tag = name[:i], name[i:]
	}
	switch {
	case repo != strings.ToLower(repo):
		return "repository names are lower-case: " + host + "/" + strings.ToLower(repo) + tag + pin
	case !repositoryPattern.MatchString(repo):
		return "a repository is path components of lower-case letters and digits, separated by / and joined inside " +
			"by one '.', one or two '_' or any '-' (team/my-package)"
	case tag != "" && !tagPattern.MatchString(tag[1:]):
		return "a tag is at most 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'"
	}
	return "REGISTRY/REPOSITORY[:TAG][@DIGEST], for example registry.example.com/team/package:v1"
}

// The OCI distribution spec's grammar of repository names and tags.
var (
	repositoryPattern = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagPattern        = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
)

// Name is REGISTRY/REPOSITORY, without tag or digest.
func (r Reference) Name() string {
	return r.Registry + "/" + r.Repository
}

// Content names the content r pins where it is kept, REGISTRY/REPOSITORY@DIGEST, without the
// tag: the unit that caches hold and that a registry grants access to. The same digest in
// another repository is other content as far as access goes: a registry answers only for its
// own repositories.
func (r Reference) Content() string {
	return r.Name() + "@" + r.Digest
}

// String formats the reference as ParseReference reads it.
func (r Reference) String() string {
	s := r.Name()
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// WithDigest returns the reference pinned to digest, keeping its tag for display.
func (r Reference) WithDigest(digest string) Reference {
	r.Digest = digest
	return r
}
