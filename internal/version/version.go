package version

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// Dev is the version of a binary built without stamps (go build, go install): no release.
const Dev = "v0.0.0-dev"

// Version is set with -ldflags "-X pkgsync.dev/pkgsync/internal/version.Version=...".
var Version = Dev

// Commit is the source revision. Set with -ldflags "-X pkgsync.dev/pkgsync/internal/version.Commit=...";
// left empty, Revision reads the revision the Go toolchain stamps into binaries built with
// go build from a git checkout.
var Commit = ""

// Repository is the repository of the controller image, without tag. Set with -ldflags
// "-X pkgsync.dev/pkgsync/internal/version.Repository=..." for builds that publish elsewhere.
var Repository = "ghcr.io/pkgsync/pkgsync"

// Source is the URL of the source repository, recorded as org.opencontainers.image.source.
const Source = "https://github.com/pkgsync/pkgsync"

// Unknown is the revision of a binary that carries none, not stamped by make build: built with
// -buildvcs=false (also when GOFLAGS holds it, in the environment or the go command's
// environment file, go env -w), with go run, or in a directory the go command finds no
// repository for. A linked git worktree is one: the go command takes only a .git directory for
// a repository, not a worktree's .git file (golang/go#58218), so outside its clone it records
// nothing, and inside it the clone's commit, not the worktree's. TestRevisionOfAPlainGoBuild
// builds in each layout.
const Unknown = "unknown"

// Revision returns the source revision of this binary: Commit when stamped (make build, with
// git rev-parse HEAD, right in a worktree too), else the VCS revision the go command records in a
// git clone's own working tree ("-dirty" appended when the tree had local changes), else the commit prefix of a pseudo-version (go install
// pkgsync.dev/pkgsync/cmd/pkgsync@COMMIT), else Unknown.
func Revision() string {
	if Commit != "" {
		return Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Unknown
	}
	return revisionOf(info)
}

// revisionOf is the revision info records.
func revisionOf(info *debug.BuildInfo) string {
	revision, modified := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		if rev := pseudoVersionRevision(info.Main.Version); rev != "" {
			return rev
		}
		return Unknown
	}
	if modified {
		revision += "-dirty"
	}
	return revision
}

// pseudoVersionRevision is the commit prefix of a pseudo-version (v0.0.0-20261202035614-62ee744abcde,
// v1.2.4-0.20261202035614-62ee744abcde+incompatible), "" for any other version.
func pseudoVersionRevision(v string) string {
	v, _, _ = strings.Cut(v, "+")
	if m := pseudoVersion.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	return ""
}

// pseudoVersion ends each of the go command's pseudo-version forms: a 14-digit UTC time and a
// 12-hex-digit commit prefix (go.dev/ref/mod#pseudo-versions).
var pseudoVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(?:[0-9A-Za-z.-]*\.)?[0-9]{14}-([0-9a-f]{12})$`)

// Image is the controller image this binary installs by default: Repository tagged with
// Version. A release's binary and its image carry the same version, so `pkgsync install` of a
// release runs the controller of that release.
// Characters a tag may not hold (such as "+" of semantic-version build metadata) become "-".
func Image() string {
	return Repository + ":" + Tag(Version)
}

// Tag turns a version into a valid image tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}, other
// characters replaced by "-".
func Tag(v string) string {
	tag := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '-'
	}, v)
	if tag == "" || tag[0] == '.' || tag[0] == '-' {
		tag = "v" + tag
	}
	if len(tag) > 128 {
		tag = tag[:128]
	}
	return tag
}
