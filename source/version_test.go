package source

import (
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

// The version annotation is the pusher's text, shown in status, kubectl and on terminals: what
// could move a cursor, clear a screen, break a line or reverse text, or is too long to show,
// is no version.
func TestCleanVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"1.4.2":                          "1.4.2",
		"v2.0.0-rc.1+build.7":            "v2.0.0-rc.1+build.7",
		"2026.11 (LTS)":                  "2026.11 (LTS)",
		"1.0 — Grüße":                    "1.0 — Grüße",
		strings.Repeat("9", 128):         strings.Repeat("9", 128),
		"":                               "",
		strings.Repeat("9", 129):         "",
		"1.4.2\n":                        "",
		"1.4.2\r1.5.0":                   "",
		"1.4.2\t":                        "",
		"1.4.2\x1b[2J":                   "",
		"\x1b]8;;https://evil/\x1b\\1.0": "",
		"1.4.2\x00":                      "",
		"\u202e2.4.1":                    "",
		"1.4\u200b.2":                    "",
		"1.4.2\x7f":                      "",
		"1.4.2\u0085":                    "",
		"1.4.2\u2028":                    "",
		"\xff\xfe":                       "",
		" 1.4.2":                         "",
		"1.4.2 ":                         "",
	} {
		assert.Equal(t, want, CleanVersion(in), "%q", in)
	}
}

// A version annotation a pusher wrote as it liked, pulled from the real registry: the
// artifact reports none; a fit one is reported as it is, from the manifest the pull reads.
func TestArtifactVersion(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	c := newClient(t, Options{})
	for name, tc := range map[string]struct{ version, want string }{
		"fit":             {"1.4.2", "1.4.2"},
		"terminal escape": {"1.4.2\x1b[2J\x1b[H", ""},
		"line break":      {"1.4.2\nReady: True", ""},
		"too long":        {strings.Repeat("1.", 2048), ""},
		"none":            {"", ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			img, err := Build(testenv.PackageDir(t), BuildOptions{Annotations: map[string]string{ocispec.AnnotationVersion: tc.version}})
			require.NoError(t, err)
			ref := mustRef(t, reg.Host+"/"+testenv.Repository(t, "version")+":stable")
			_, err = c.Push(t.Context(), img, []Reference{ref}, nil)
			require.NoError(t, err)
			a, err := c.Pull(t.Context(), ref, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, a.Version())
		})
	}
}
