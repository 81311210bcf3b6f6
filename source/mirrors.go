package source

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Overrides rewrite image references before any registry is asked, with Package Operator's
// meaning: a prefix override replaces the longest matching prefix of the reference as written
// (REGISTRY/REPOSITORY...), and a host override then replaces the registry host. What is
// rewritten is where the image is read from; the reference as written stays its name (caches,
// status, trust policies and signature identity use it).
type Overrides struct {
	// Hosts maps a registry host (host or host:port, matched exactly) to the host to use instead.
	Hosts map[string]string
	// Prefixes replace the longest matching prefix of an image reference.
	Prefixes []PrefixOverride
}

// PrefixOverride replaces the prefix From of an image reference with To. The match is on the
// string, as Package Operator makes it: end From with "/" to match whole path segments.
type PrefixOverride struct {
	From, To string
}

// ParseHostOverrides reads Package Operator's --registry-host-overrides:
// FROM=TO[,FROM=TO...], for example quay.io=mirror.example.com:5000. Package Operator skips an
// entry without "="; here it is an error, as is an empty side or a host given twice.
func ParseHostOverrides(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, entry := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(entry, "=")
		switch {
		case !ok || from == "" || to == "":
			return nil, fmt.Errorf("registry host override %q: want FROM=TO, for example quay.io=mirror.example.com", entry)
		case strings.Contains(from, "/") || strings.Contains(to, "/"):
			return nil, fmt.Errorf("registry host override %q: a host override names hosts (host or host:port), not repositories (prefix overrides do)", entry)
		}
		if _, dup := out[from]; dup {
			return nil, fmt.Errorf("registry host override %q: %s is overridden twice", entry, from)
		}
		out[from] = to
	}
	return out, nil
}

// ParsePrefixOverrides reads Package Operator's --image-prefix-overrides:
// FROM=TO[,FROM=TO...], for example quay.io/my-org/=mirror.example.com/mirror-org/.
func ParsePrefixOverrides(s string) ([]PrefixOverride, error) {
	if s == "" {
		return nil, nil
	}
	var out []PrefixOverride
	for _, entry := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(entry, "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("image prefix override %q: want FROM=TO, for example quay.io/my-org/=mirror.example.com/mirror-org/", entry)
		}
		if slices.ContainsFunc(out, func(o PrefixOverride) bool { return o.From == from }) {
			return nil, fmt.Errorf("image prefix override %q: %s is overridden twice", entry, from)
		}
		out = append(out, PrefixOverride{From: from, To: to})
	}
	return out, nil
}

// IsZero tells whether o rewrites nothing.
func (o Overrides) IsZero() bool { return len(o.Hosts) == 0 && len(o.Prefixes) == 0 }

// Image rewrites an image reference as written in a package (a lock file's REPOSITORY@DIGEST,
// say): the longest matching prefix override first, then the host override of its registry.
// A reference without a registry host is Docker Hub's (docker.io/library/NAME for a one-part
// name), as Package Operator and container runtimes read it.
func (o Overrides) Image(image string) string {
	best := -1
	for i, p := range o.Prefixes {
		if strings.HasPrefix(image, p.From) && (best < 0 || len(p.From) > len(o.Prefixes[best].From)) {
			best = i
		}
	}
	if best >= 0 {
		image = o.Prefixes[best].To + image[len(o.Prefixes[best].From):]
	}
	if len(o.Hosts) == 0 {
		return image
	}
	host, rest := splitHost(image)
	if to, ok := o.Hosts[host]; ok {
		return to + "/" + rest
	}
	return image
}

// splitHost splits an image reference into its registry host and the rest, as the Docker
// reference grammar does: a first component with a "." or ":", or localhost, is a host.
func splitHost(image string) (host, rest string) {
	first, after, ok := strings.Cut(image, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first, after
	}
	if !ok {
		return "docker.io", "library/" + image
	}
	return "docker.io", image
}

// reference rewrites ref's registry and repository, keeping its tag and digest.
func (o Overrides) reference(ref Reference) Reference {
	if o.IsZero() {
		return ref
	}
	name := o.Image(ref.Name())
	host, repo, ok := strings.Cut(name, "/")
	if !ok || host == "" || repo == "" {
		// An override that leaves no repository: read from where the reference says.
		return ref
	}
	ref.Registry, ref.Repository = host, repo
	return ref
}

// MirrorSet is one source of images and the mirrors that hold its content, as OpenShift's
// ImageDigestMirrorSet and ImageTagMirrorSet describe them (spec.imageDigestMirrors[],
// spec.imageTagMirrors[]) and HyperShift's HostedCluster does (spec.imageContentSources[]).
type MirrorSet struct {
	// Source is a registry host (host or host:port), a registry and repository prefix
	// (host/namespace, host/namespace/repository), or a wildcard host (*.example.com). A
	// reference is under a host or prefix when its REGISTRY/REPOSITORY equals it or continues
	// it with "/"; under a wildcard when its registry host ends in the wildcard's domain below
	// the apex (*.example.com: a.example.com and a.b.example.com, not example.com) and names no
	// port (a.example.com:5000 is another registry, as quay.io:5000 is not under quay.io).
	Source string
	// Mirrors replace what Source matched (the whole registry host, for a wildcard), in the
	// order they are tried.
	Mirrors []string
	// NeverContactSource stops the source from being tried once every mirror failed
	// (mirrorSourcePolicy: NeverContactSource).
	NeverContactSource bool
}

// MirrorSets are the mirrors of the management cluster: Digest for references pinned to a
// digest (ImageDigestMirrorSets), Tag for references named by a tag (ImageTagMirrorSets).
type MirrorSets struct {
	Digest []MirrorSet
	Tag    []MirrorSet
}

// Validate checks the sources and mirrors: host[:port][/path] without tag or digest; a source
// may also be a wildcard host, *.domain (OpenShift's own pattern: no port, no path).
func (m MirrorSets) Validate() error {
	var errs []error
	for _, sets := range [][]MirrorSet{m.Digest, m.Tag} {
		errs = append(errs, validateSets(sets))
	}
	return errors.Join(errs...)
}

// validateSets checks the sources and mirrors of sets, as Validate does.
func validateSets(sets []MirrorSet) error {
	var errs []error
	for _, s := range sets {
		if !wildcardSource.MatchString(s.Source) {
			if err := checkMirrorName(s.Source); err != nil {
				errs = append(errs, fmt.Errorf("mirror set of %s: %w", s.Source, err))
			}
		}
		for _, name := range s.Mirrors {
			if err := checkMirrorName(name); err != nil {
				errs = append(errs, fmt.Errorf("mirror set of %s: mirror %w", s.Source, err))
			}
		}
	}
	return errors.Join(errs...)
}

// OpenShift's patterns for a mirror set's source and mirrors (ImageDigestMirrors,
// ImageTagMirrors): wildcardSource is "*" and one or more domain labels, no port, no path;
// mirrorName is host[:port][/path], the other form of a source.
var (
	wildcardSource = regexp.MustCompile(`^\*(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+$`)
	mirrorName     = regexp.MustCompile(`^((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?)(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$`)
)

func checkMirrorName(name string) error {
	if strings.HasPrefix(name, "*") {
		return fmt.Errorf("%q: a wildcard is a source's form (*.example.com), never a mirror's, and has no port or path", name)
	}
	probe := name
	if !strings.Contains(probe, "/") {
		probe += "/x"
	}
	ref, err := ParseReference(probe)
	if err != nil || ref.Tag != "" || ref.Digest != "" || !mirrorName.MatchString(name) {
		return fmt.Errorf("%q is not REGISTRY[/REPOSITORY]", name)
	}
	return nil
}

// kind selects which mirrors a reference goes through.
type mirrorKind int

const (
	// byTag: a reference named by a tag (resolved or not): tag mirrors.
	byTag mirrorKind = iota
	// byDigest: a reference pinned to a digest only: digest mirrors.
	byDigest
)

// kindOf tells which mirrors ref, as written, is read through: a tag, even one resolved to a
// digest since, is read where its tag points; a digest alone through digest mirrors.
func kindOf(ref Reference) mirrorKind {
	if ref.Tag != "" {
		return byTag
	}
	return byDigest
}

// sourceMatch is how a source covers a reference: cover is the length of the prefix of the
// reference's REGISTRY/REPOSITORY that the source matched (what a mirror replaces), -1 when it
// does not match.
type sourceMatch struct {
	cover    int
	wildcard bool
	length   int
}

// moreSpecific orders matches as OpenShift's "most specific source wins", as containers/image
// reads it (the longest prefix): any host or prefix source over a wildcard (a wildcard can be no
// longer than the host it matches, and names every host of its domain), then the longer source.
func (a sourceMatch) moreSpecific(b sourceMatch) bool {
	if a.wildcard != b.wildcard {
		return !a.wildcard
	}
	return a.length > b.length
}

// matchSource tells how source covers the reference whose registry host is host and whose
// REGISTRY/REPOSITORY is name.
func matchSource(source, host, name string) sourceMatch {
	if domain, ok := strings.CutPrefix(source, "*"); ok {
		// domain is ".example.com": a host below it, without a port. containers/image would match
		// a.example.com:5000 too and then fail to rewrite it (the mirror followed by ":5000/...").
		if len(host) > len(domain) && strings.HasSuffix(host, domain) && !strings.Contains(host, ":") {
			return sourceMatch{cover: len(host), wildcard: true, length: len(source)}
		}
		return sourceMatch{cover: -1}
	}
	if name == source || strings.HasPrefix(name, source+"/") {
		return sourceMatch{cover: len(source), length: len(source)}
	}
	return sourceMatch{cover: -1}
}

// locations returns where ref is read from, in order: the overrides applied, then each mirror of
// the most specific source the result is under (mirror sets of one source merged, in order),
// then, for a reference pinned to a digest, the mirrors of the caller's own most specific source
// (caller: a HostedCluster's imageContentSources, digest mirrors as HyperShift makes them), then
// the (overridden) reference itself unless a mirror set of the cluster's source says
// NeverContactSource. Every location keeps ref's tag and digest.
func (m *MirrorSets) locations(ref Reference, o Overrides, kind mirrorKind, caller []MirrorSet) []Reference {
	base := o.reference(ref)
	var sets []MirrorSet
	if m != nil {
		sets = m.Digest
		if kind == byTag {
			sets = m.Tag
		}
	}
	name := base.Name()
	var out []Reference
	seen := map[string]bool{}
	never := false
	add := func(sets []MirrorSet) {
		best, chosen := sourceMatch{cover: -1}, ""
		for _, s := range sets {
			if m := matchSource(s.Source, base.Registry, name); m.cover >= 0 && (best.cover < 0 || m.moreSpecific(best)) {
				best, chosen = m, s.Source
			}
		}
		if best.cover < 0 {
			return
		}
		rest := name[best.cover:]
		for _, s := range sets {
			if s.Source != chosen {
				continue
			}
			never = never || s.NeverContactSource
			for _, mirror := range s.Mirrors {
				host, repo, ok := strings.Cut(mirror+rest, "/")
				if !ok || seen[host+"/"+repo] {
					continue
				}
				seen[host+"/"+repo] = true
				loc := base
				loc.Registry, loc.Repository = host, repo
				out = append(out, loc)
			}
		}
	}
	add(sets)
	if ref.Digest != "" {
		add(caller)
	}
	if !never && !seen[name] {
		out = append(out, base)
	}
	return out
}
