package source

import (
	"strings"
	"unicode"
	"unicode/utf8"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// MaxVersionLength bounds a version read from an image annotation, in bytes: the
// distribution spec's bound on a tag, which a version usually also is.
const MaxVersionLength = 128

// CleanVersion returns v when it is fit to show as a package version, else "". The version an
// image declares (org.opencontainers.image.version) is the pusher's text: it goes into status,
// kubectl's columns and the CLI's output on terminals. A version over MaxVersionLength bytes,
// not valid UTF-8, with a character that is not printable (a control character such as ESC, a
// line break or tab, a bidirectional or other formatting character, a zero-width one) or with
// space at either end is no version. It is left out rather than cleaned: what is left of
// "1.4.2<RLO>..." after cleaning could read as another version.
func CleanVersion(v string) string {
	if len(v) > MaxVersionLength || !utf8.ValidString(v) || strings.TrimSpace(v) != v {
		return ""
	}
	for _, r := range v {
		if !unicode.IsGraphic(r) {
			return ""
		}
	}
	return v
}

// Version is the package version the image's manifest declares, as CleanVersion lets it be
// shown: read from the manifest the pull read, at no further request. "" when it declares none.
func (a *Artifact) Version() string {
	return CleanVersion(a.Annotations[ocispec.AnnotationVersion])
}
