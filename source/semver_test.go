package source

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/test/testenv"
)

func TestVersionRangeHighest(t *testing.T) {
	t.Parallel()
	tags := []string{"v1.3.0", "1.4.0", "1.4.2", "1.5.0-rc.1", "2.0.0", "latest", "sha256-abc.sig", "1.4.2-rc.1"}
	cases := []struct {
		rng, want string
	}{
		{">=1.4.0 <2.0.0", "1.4.2"},
		{">=1.4.0, <2.0.0", "1.4.2"},
		{"^1", "1.4.2"},
		{"~1.3", "v1.3.0"},
		{">=1.5.0-0 <2.0.0", "1.5.0-rc.1"}, // a pre-release only when the range asks for one
		{">=1.0.0", "2.0.0"},
		{"<1.0.0 || >=2.0.0", "2.0.0"},
		{">=3", ""},
	}
	for _, tc := range cases {
		t.Run(tc.rng, func(t *testing.T) {
			t.Parallel()
			r, err := ParseVersionRange(tc.rng)
			require.NoError(t, err)
			got, ok := r.Highest(tags)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := ParseVersionRange("not a range")
	require.ErrorContains(t, err, `version range "not a range"`)
}

func TestResolveVersion(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	pusher := newClient(t, Options{})
	ctx := t.Context()
	versions := reg.Host + "/" + testenv.Repository(t, "versions")
	digests := map[string]string{}
	for _, tag := range []string{"1.0.0", "1.1.0", "2.0.0-rc.1", "latest", "v0.9.0"} {
		digests[tag] = pushOther(t, pusher, mustRef(t, versions+":"+tag), "version: "+tag+"\n")
	}

	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	// Pages of two, where the registry pages: the distribution spec lets a registry answer a
	// listing in one response, and link an empty page after a full one (Distribution does), so
	// the listings are counted, not their pages.
	c.tagLists.pageSize = 2
	rng, err := ParseVersionRange(">=1.0.0 <2.0.0")
	require.NoError(t, err)
	repo := mustRef(t, versions)

	got, err := c.ResolveVersion(ctx, repo, rng, nil, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, versions+":1.1.0@"+digests["1.1.0"], got.String())
	listed := counter.count("GET other")
	assert.Positive(t, listed, "requests: %v", counter.requests)
	assert.Equal(t, 1, counter.count("HEAD manifests"))

	// A new higher tag: not seen within maxAge (one listing per interval is shared), seen after.
	digests["1.2.0"] = pushOther(t, pusher, mustRef(t, versions+":1.2.0"), "version: 1.2.0\n")
	got, err = c.ResolveVersion(ctx, repo, rng, nil, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", got.Tag)
	assert.Equal(t, listed, counter.count("GET other"), "no request within maxAge")
	got, err = c.ResolveVersion(ctx, repo, rng, nil, 0)
	require.NoError(t, err)
	assert.Equal(t, versions+":1.2.0@"+digests["1.2.0"], got.String())
	assert.Greater(t, counter.count("GET other"), listed, "listed again at maxAge 0")

	// Pre-releases only when asked for.
	pre, err := ParseVersionRange(">=2.0.0-0")
	require.NoError(t, err)
	got, err = c.ResolveVersion(ctx, repo, pre, nil, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "2.0.0-rc.1", got.Tag)

	// No match names what there is: every page was read (v0.9.0 sorts last).
	none, err := ParseVersionRange(">=3.0.0")
	require.NoError(t, err)
	_, err = c.ResolveVersion(ctx, repo, none, nil, time.Hour)
	require.ErrorIs(t, err, ErrNoMatchingVersion)
	assert.ErrorContains(t, err, `">=3.0.0" (5 version tags, the highest [2.0.0-rc.1 1.2.0 1.1.0 1.0.0 v0.9.0])`)

	_, err = c.ResolveVersion(ctx, mustRef(t, reg.Host+"/"+testenv.Repository(t, "missing")), rng, nil, 0)
	require.ErrorContains(t, err, "not found")
}

// A repository with more tags than the bound is refused, not read to the end.
func TestTagsBounded(t *testing.T) {
	t.Parallel()
	reg := testenv.NewRegistry(t, testenv.RegistryOptions{})
	pusher := newClient(t, Options{})
	name := testenv.Repository(t, "many")
	img, ref := pushPackage(t, pusher, reg.Host, name, nil)
	for _, tag := range []string{"a", "b", "c", "d"} {
		_, err := pusher.Push(t.Context(), img, []Reference{mustRef(t, reg.Host+"/"+name+":"+tag)}, nil)
		require.NoError(t, err)
	}
	counter := newCountingTransport()
	c := newClient(t, Options{Transport: counter})
	c.tagLists.pageSize, c.tagLists.maxTags = 2, 3
	_, err := c.Tags(t.Context(), ref, nil)
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, "more than 3 tags")
	// Pages of two stop at the second, past the bound of three; a registry that does not page
	// (the spec lets it) answers all five tags in one.
	assert.LessOrEqual(t, counter.count("GET other"), 2, "the listing stops at the bound: %v", counter.requests)

	c.tagLists.maxTags = 5
	tags, err := c.Tags(t.Context(), ref, nil)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"v1", "a", "b", "c", "d"}, tags)
}
