package packages

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pkgsync.dev/pkgsync/source"
)

func TestPackageVersion(t *testing.T) {
	t.Parallel()
	ref := source.Reference{Registry: "registry.example.com", Repository: "addons/a", Tag: "v1.5.0", Digest: "sha256:b"}
	pulled := newImageVersions()
	pulled.add(ref.Content(), "1.4.2")
	undeclared := newImageVersions()
	undeclared.add(ref.Content(), "")
	for name, tc := range map[string]struct {
		byRange  bool
		versions *imageVersions
		known    string
		want     string
	}{
		"semver: the chosen tag":                         {byRange: true, versions: pulled, want: "v1.5.0"},
		"the image's, as pulled":                         {versions: pulled, known: "1.0.0", want: "1.4.2"},
		"none declared, as pulled":                       {versions: undeclared, known: "1.0.0", want: ""},
		"not remembered: what the status said":           {versions: newImageVersions(), known: "1.4.2", want: "1.4.2"},
		"not remembered, status not fit to show":         {versions: newImageVersions(), known: "1.4.2\n", want: ""},
		"without a memory (tests): what the status said": {known: "1.4.2", want: "1.4.2"},
	} {
		assert.Equal(t, tc.want, packageVersion(tc.byRange, ref, tc.versions, tc.known), name)
	}
}
