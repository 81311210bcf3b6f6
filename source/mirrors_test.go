package source

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseOverrides(t *testing.T) {
	t.Parallel()
	hosts, err := ParseHostOverrides("quay.io=localhost:123,registry.example.com=mirror.example.com")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"quay.io": "localhost:123", "registry.example.com": "mirror.example.com"}, hosts)
	prefixes, err := ParsePrefixOverrides("quay.io/foo/=quay.io/bar/,quay.io/=mirror.example.com/quay/")
	require.NoError(t, err)
	assert.Equal(t, []PrefixOverride{{From: "quay.io/foo/", To: "quay.io/bar/"}, {From: "quay.io/", To: "mirror.example.com/quay/"}}, prefixes)

	for _, bad := range []string{"quay.io", "=x", "quay.io=", "quay.io/org=x", "a=b,a=c"} {
		_, err := ParseHostOverrides(bad)
		assert.Error(t, err, bad)
	}
	for _, bad := range []string{"quay.io/", "=x/", "a/=", "a/=b/,a/=c/"} {
		_, err := ParsePrefixOverrides(bad)
		assert.Error(t, err, bad)
	}
	empty, err := ParseHostOverrides("")
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestOverridesImage(t *testing.T) {
	t.Parallel()
	o := Overrides{
		Hosts: map[string]string{"quay.io": "mirror.example.com:5000", "docker.io": "hub.example.com"},
		Prefixes: []PrefixOverride{
			{From: "quay.io/foo/", To: "quay.io/bar/"},
			{From: "quay.io/foo/special/", To: "special.example.com/x/"},
		},
	}
	tests := map[string]string{
		// The longest prefix wins, then the host of the result is overridden.
		"quay.io/foo/pkg@sha256:abc":       "mirror.example.com:5000/bar/pkg@sha256:abc",
		"quay.io/foo/special/pkg:v1":       "special.example.com/x/pkg:v1",
		"quay.io/other/pkg:v1":             "mirror.example.com:5000/other/pkg:v1",
		"nginx:1.25":                       "hub.example.com/library/nginx:1.25",
		"team/app:v1":                      "hub.example.com/team/app:v1",
		"registry.example.com/team/app:v1": "registry.example.com/team/app:v1",
		// Hosts match exactly: Package Operator's string prefix would rewrite this one.
		"quay.io.example.com/team/app:v1": "quay.io.example.com/team/app:v1",
	}
	for in, want := range tests {
		assert.Equal(t, want, o.Image(in), in)
	}
	assert.Equal(t, "quay.io/x:v1", Overrides{}.Image("quay.io/x:v1"))
}

func TestLocations(t *testing.T) {
	t.Parallel()
	sets := &MirrorSets{
		Digest: []MirrorSet{
			{Source: "quay.io", Mirrors: []string{"all.example.com/quay"}},
			{Source: "quay.io/team", Mirrors: []string{"one.example.com/team", "two.example.com/t"}},
			{Source: "quay.io/team", Mirrors: []string{"two.example.com/t", "three.example.com/team"}},
			{Source: "quay.io/locked", Mirrors: []string{"locked.example.com/l"}, NeverContactSource: true},
			{Source: "quay.io/nowhere", NeverContactSource: true},
		},
		Tag: []MirrorSet{{Source: "quay.io/team/app", Mirrors: []string{"tags.example.com/app"}}},
	}
	names := func(refs []Reference) []string {
		out := []string{}
		for _, r := range refs {
			out = append(out, r.String())
		}
		return out
	}
	d := "@sha256:" + strings.Repeat("a", 64)
	tests := []struct {
		ref  string
		kind mirrorKind
		o    Overrides
		want []string
	}{
		{"quay.io/team/app" + d, byDigest, Overrides{}, []string{
			"one.example.com/team/app" + d, "two.example.com/t/app" + d, "three.example.com/team/app" + d, "quay.io/team/app" + d}},
		{"quay.io/other/app" + d, byDigest, Overrides{}, []string{"all.example.com/quay/other/app" + d, "quay.io/other/app" + d}},
		{"quay.io/locked/app" + d, byDigest, Overrides{}, []string{"locked.example.com/l/app" + d}},
		{"quay.io/nowhere/app" + d, byDigest, Overrides{}, []string{}},
		// Not a path segment boundary: quay.io/teamwork is not under quay.io/team.
		{"quay.io/teamwork/app" + d, byDigest, Overrides{}, []string{"all.example.com/quay/teamwork/app" + d, "quay.io/teamwork/app" + d}},
		{"quay.io/team/app:v1", byTag, Overrides{}, []string{"tags.example.com/app:v1", "quay.io/team/app:v1"}},
		{"quay.io/other/app:v1", byTag, Overrides{}, []string{"quay.io/other/app:v1"}},
		// Overrides first; mirror sets match what they made.
		{"src.example.com/team/app" + d, byDigest, Overrides{Hosts: map[string]string{"src.example.com": "quay.io"}}, []string{
			"one.example.com/team/app" + d, "two.example.com/t/app" + d, "three.example.com/team/app" + d, "quay.io/team/app" + d}},
	}
	for _, tt := range tests {
		ref, err := ParseReference(tt.ref)
		require.NoError(t, err)
		assert.Equal(t, tt.want, names(sets.locations(ref, tt.o, tt.kind, nil)), tt.ref)
	}
	var none *MirrorSets
	ref := mustRef(t, "quay.io/team/app:v1")
	assert.Equal(t, []Reference{ref}, none.locations(ref, Overrides{}, byTag, nil))

	assert.Error(t, MirrorSets{Tag: []MirrorSet{{Source: "quay.io/x", Mirrors: []string{"m.example.com/x:v1"}}}}.Validate())
	assert.NoError(t, sets.Validate())
}

// TestWildcardLocations: a wildcard source (*.example.com) covers every host below its domain,
// not the apex and not a host with a port, and replaces the whole host; the most specific
// source wins: any host or prefix source over a wildcard, the longer wildcard over the shorter.
func TestWildcardLocations(t *testing.T) {
	t.Parallel()
	sets := &MirrorSets{Digest: []MirrorSet{
		{Source: "*.example.com", Mirrors: []string{"mirror.local/example"}, NeverContactSource: true},
		{Source: "*.team.example.com", Mirrors: []string{"mirror.local/team"}},
		{Source: "reg.team.example.com", Mirrors: []string{"mirror.local/exact"}},
		{Source: "*.example.com", Mirrors: []string{"second.local/ex"}},
	}}
	d := "@sha256:" + strings.Repeat("b", 64)
	tests := []struct {
		ref  string
		want []string
	}{
		// Any subdomain, any depth; the mirrors of every set with the source, in order.
		{"registry.example.com/product/repo" + d, []string{"mirror.local/example/product/repo" + d, "second.local/ex/product/repo" + d}},
		{"a.b.example.com/repo" + d, []string{"mirror.local/example/repo" + d, "second.local/ex/repo" + d}},
		// Not the apex, not a host that merely ends alike, not a host with a port.
		{"example.com/product/repo" + d, []string{"example.com/product/repo" + d}},
		{"badexample.com/repo" + d, []string{"badexample.com/repo" + d}},
		{"example.com.evil.org/repo" + d, []string{"example.com.evil.org/repo" + d}},
		{"registry.example.com:5000/repo" + d, []string{"registry.example.com:5000/repo" + d}},
		// The longer wildcard, without NeverContactSource.
		{"x.team.example.com/repo" + d, []string{"mirror.local/team/repo" + d, "x.team.example.com/repo" + d}},
		// A host source over any wildcard that matches it.
		{"reg.team.example.com/repo" + d, []string{"mirror.local/exact/repo" + d, "reg.team.example.com/repo" + d}},
	}
	for _, tt := range tests {
		ref := mustRef(t, tt.ref)
		got := []string{}
		for _, r := range sets.locations(ref, Overrides{}, byDigest, nil) {
			got = append(got, r.String())
		}
		assert.Equal(t, tt.want, got, tt.ref)
	}

	require.NoError(t, sets.Validate())
	for _, bad := range []MirrorSets{
		{Digest: []MirrorSet{{Source: "*.example.com:5000", Mirrors: []string{"m.example.com"}}}},
		{Digest: []MirrorSet{{Source: "*.example.com/team", Mirrors: []string{"m.example.com"}}}},
		{Digest: []MirrorSet{{Source: "example.*.com", Mirrors: []string{"m.example.com"}}}},
		{Digest: []MirrorSet{{Source: "*", Mirrors: []string{"m.example.com"}}}},
		{Tag: []MirrorSet{{Source: "quay.io", Mirrors: []string{"*.example.com"}}}},
	} {
		assert.Error(t, bad.Validate(), bad)
	}
}
