package receiver

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Source names a kind of sender: the path it posts to (/hooks/SOURCE) and the key of its
// secret.
type Source string

const (
	// Distribution is the CNCF Distribution registry's notifications.endpoints.
	Distribution Source = "distribution"
	// Harbor is a Harbor project's webhook (payload format Default).
	Harbor Source = "harbor"
	// Generic is {"repository": "[HOST/]PATH", "tag": "TAG"}, for CI systems and scripts.
	Generic Source = "generic"
)

// Sources are the sources the receiver answers.
var Sources = []Source{Distribution, Harbor, Generic}

// Notification says that a tag of a repository was pushed.
type Notification struct {
	// Registry is the registry host[:port] a generic payload named; empty when the payload named
	// none (Distribution and Harbor notifications never do): the repository in any registry.
	Registry string
	// Repository is the repository path inside the registry: team/package.
	Repository string
	// Tag is the tag pushed; empty means any tag of the repository (a generic payload without one).
	Tag string
	// Digest is the digest a Distribution registry says it pushed under Tag, or empty. It is a
	// hint, never applied: Distribution sends its event before it moves the tag, so a resolution
	// that does not see this digest yet looks again, a few times at most.
	Digest string
}

// Key is the repository the notification names: PATH, or HOST/PATH when it names a registry.
func (n Notification) Key() string {
	if n.Registry == "" {
		return n.Repository
	}
	return n.Registry + "/" + n.Repository
}

// Push is what one request names of one repository: the tags pushed, each with the digest a
// Distribution registry named for it (empty when none). The receiver hands the waker one Push
// per repository and request, so that a repository's followers are looked up once for all the
// tags a request names.
type Push struct {
	// Registry and Repository are as in Notification.
	Registry, Repository string
	// Tags maps each tag pushed to its digest hint; the tag "" is every tag (a generic payload
	// without one).
	Tags map[string]string
}

// Key is the repository the push names: PATH, or HOST/PATH (Notification.Key).
func (p Push) Key() string {
	return Notification{Registry: p.Registry, Repository: p.Repository}.Key()
}

// The distribution spec's grammar: a repository path of lowercase components, a tag of at most
// 128 word characters, dots and dashes. Anything else names nothing pkgsync could follow.
var (
	repositoryPattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagPattern        = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestPattern     = regexp.MustCompile(`^sha256:[a-f0-9]{64}$|^sha512:[a-f0-9]{128}$`)
	hostPattern       = regexp.MustCompile(`^[A-Za-z0-9.-]+(?::[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](?::[0-9]+)?$`)
)

// maxRepositoryLength bounds a repository name (host included), as registries do.
const maxRepositoryLength = 255

// decode reads the notifications of a payload from source. A payload that is not one of the
// source's is an error; one that names no push of a tag (a pull, a blob upload, a push by
// digest) gives none. Whatever else it carries (digests, times, URLs) is not read.
func decode(source Source, body []byte) ([]Notification, error) {
	var (
		out []Notification
		err error
	)
	switch source {
	case Distribution:
		out, err = decodeDistribution(body)
	case Harbor:
		out, err = decodeHarbor(body)
	case Generic:
		out, err = decodeGeneric(body)
	default:
		return nil, fmt.Errorf("unknown source %q", source)
	}
	if err != nil {
		return nil, err
	}
	seen := map[Notification]bool{}
	unique := out[:0]
	for _, n := range out {
		if err := n.validate(); err != nil {
			return nil, err
		}
		if !seen[n] {
			seen[n] = true
			unique = append(unique, n)
		}
	}
	return unique, nil
}

func (n Notification) validate() error {
	if len(n.Key()) > maxRepositoryLength || !repositoryPattern.MatchString(n.Repository) {
		return fmt.Errorf("repository %q is not a repository name", truncate(n.Repository))
	}
	if n.Registry != "" && !hostPattern.MatchString(n.Registry) {
		return fmt.Errorf("registry %q is not a host", truncate(n.Registry))
	}
	if n.Tag != "" && !tagPattern.MatchString(n.Tag) {
		return fmt.Errorf("tag %q is not a tag", truncate(n.Tag))
	}
	if n.Digest != "" && (n.Tag == "" || !digestPattern.MatchString(n.Digest)) {
		return fmt.Errorf("digest %q is not a digest of a tag", truncate(n.Digest))
	}
	return nil
}

// truncate keeps error messages short whatever a payload holds.
func truncate(s string) string {
	const limit = 64
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}

// distributionEnvelope is the part of Distribution's notification envelope
// (application/vnd.docker.distribution.events.v1+json) that is read.
type distributionEnvelope struct {
	Events []struct {
		Action string `json:"action"`
		Target struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
			Digest     string `json:"digest"`
		} `json:"target"`
	} `json:"events"`
}

// decodeDistribution reads the push events that name a tag: a manifest pushed by tag. Blob
// uploads, pushes by digest, pulls, mounts and deletes change no tag. The request's host is
// not read: it is the name the pusher used, not necessarily the one Packages use.
func decodeDistribution(body []byte) ([]Notification, error) {
	var env distributionEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("not a Distribution notification envelope: %w", err)
	}
	var out []Notification
	for _, e := range env.Events {
		if e.Action == "push" && e.Target.Tag != "" {
			n := Notification{Repository: e.Target.Repository, Tag: e.Target.Tag}
			if digestPattern.MatchString(e.Target.Digest) {
				n.Digest = e.Target.Digest
			}
			out = append(out, n)
		}
	}
	return out, nil
}

// harborPayload is the part of Harbor's webhook payload (format Default) that is read.
type harborPayload struct {
	Type      string `json:"type"`
	EventData struct {
		Repository struct {
			RepoFullName string `json:"repo_full_name"`
			Namespace    string `json:"namespace"`
			Name         string `json:"name"`
		} `json:"repository"`
		Resources []struct {
			Tag string `json:"tag"`
		} `json:"resources"`
	} `json:"event_data"`
}

// decodeHarbor reads a PUSH_ARTIFACT event's repository (project/name) and the tags of its
// resources; other event types change no tag.
func decodeHarbor(body []byte) ([]Notification, error) {
	var p harborPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("not a Harbor webhook payload: %w", err)
	}
	if p.Type != "PUSH_ARTIFACT" {
		return nil, nil
	}
	repo := p.EventData.Repository
	name := repo.RepoFullName
	if name == "" && repo.Namespace != "" && repo.Name != "" {
		name = repo.Namespace + "/" + repo.Name
	}
	var out []Notification
	for _, r := range p.EventData.Resources {
		if r.Tag != "" {
			out = append(out, Notification{Repository: name, Tag: r.Tag})
		}
	}
	return out, nil
}

// genericPayload is {"repository": "[HOST/]PATH", "tag": "TAG"}.
type genericPayload struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
}

// decodeGeneric reads one repository, with a registry host when its first component is one
// (has a dot or a port, or is localhost, as docker reads image names), and an optional tag.
func decodeGeneric(body []byte) ([]Notification, error) {
	var p genericPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("not a generic notification: %w", err)
	}
	if p.Repository == "" {
		return nil, fmt.Errorf(`generic notification without "repository"`)
	}
	n := Notification{Repository: p.Repository, Tag: p.Tag}
	if first, rest, ok := strings.Cut(p.Repository, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		n.Registry, n.Repository = first, rest
	}
	return []Notification{n}, nil
}
