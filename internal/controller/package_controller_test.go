package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// TestPackageRevisionChoice: the digest a Package resolves its spec.image to, with and without
// spec.semver, and the reason when there is none to take.
func TestPackageRevisionChoice(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t)
	creds := userCredentials("reader")
	// One repository with versions 1.0.0, 1.2.0 and 2.0.0, each its own image, and a tag that
	// is not a version.
	push := func(content string, tags ...string) string {
		t.Helper()
		img := buildPackage(t, content)
		var refs []source.Reference
		for _, tg := range tags {
			ref, err := source.ParseReference(f.reg.host + "/addons/versions:" + tg)
			require.NoError(t, err)
			refs = append(refs, ref)
		}
		_, err := f.src.Push(t.Context(), img, refs, creds)
		require.NoError(t, err)
		return img.Digest
	}
	zero := push("zero", "1.0.0")
	first := push("one", "1.2.0")
	second := push("two", "2.0.0", "latest")
	image := f.reg.host + "/addons/versions:latest"

	tests := []struct {
		name       string
		image      string
		semver     string
		wantDigest string
		reason     string
	}{
		{name: "a tag: its digest", image: image, wantDigest: second},
		{name: "a range: the highest version it accepts", image: image, semver: "<2.0.0", wantDigest: first},
		{name: "a range below the highest", image: image, semver: "~1.0", wantDigest: zero},
		{name: "a range that takes the newest", image: image, semver: ">=1.0.0", wantDigest: second},
		{name: "no version in the range: waits for the interval", image: image, semver: ">=3.0.0", reason: v1alpha1.NoMatchingVersionReason},
		{name: "not a range: stalls", image: image, semver: "one or two", reason: v1alpha1.InvalidVersionRangeReason},
		{name: "a tag that is not there: pull failed", image: f.reg.host + "/addons/versions:absent", reason: v1alpha1.PullFailedReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &packageSteps[*v1alpha1.Package]{source: f.src}
			ref, err := source.ParseReference(tt.image)
			require.NoError(t, err)
			spec := &v1alpha1.PackageSpec{Image: tt.image, Semver: tt.semver}
			got, err := r.resolve(t.Context(), spec, ref, creds, 0)
			if tt.reason != "" {
				require.Error(t, err)
				assert.Equal(t, tt.reason, reasonFor(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantDigest, got.Digest)
		})
	}
}
