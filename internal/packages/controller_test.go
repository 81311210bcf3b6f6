package packages

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
	"pkgsync.dev/pkgsync/source"
)

func TestResolveMaxAge(t *testing.T) {
	t.Parallel()
	interval := 10 * time.Minute
	now := time.Date(2025, time.March, 4, 5, 6, 7, 0, time.UTC)
	pkg := func(mutate func(*v1alpha1.Package)) *v1alpha1.Package {
		p := &v1alpha1.Package{ObjectMeta: metav1.ObjectMeta{Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		p.Status.LastAttemptedRevision = "sha256:abc"
		p.Status.ObservedGeneration = 1
		mutate(p)
		return p
	}
	assert.Equal(t, interval/2, resolveMaxAge(pkg(func(*v1alpha1.Package) {}), "", interval, now), "interval reconcile")

	requested := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": now.Add(-3 * time.Second).Format(time.RFC3339Nano)}
	})
	assert.Equal(t, 3*time.Second, resolveMaxAge(requested, requested.Status.GetLastHandledReconcileRequest(), interval, now), "a resolution made after the request is fresh enough")

	future := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": now.Add(time.Minute).Format(time.RFC3339Nano)}
	})
	assert.Zero(t, resolveMaxAge(future, future.Status.GetLastHandledReconcileRequest(), interval, now), "a request from a clock ahead of ours asks the registry")

	handled := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": "token"}
		p.Status.LastHandledReconcileAt = "token"
	})
	assert.Equal(t, interval/2, resolveMaxAge(handled, handled.Status.GetLastHandledReconcileRequest(), interval, now), "an old request is not new")

	odd := pkg(func(p *v1alpha1.Package) {
		p.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": "now please"}
	})
	assert.Zero(t, resolveMaxAge(odd, odd.Status.GetLastHandledReconcileRequest(), interval, now), "a request that is not a time asks the registry")

	fresh := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
	})
	assert.Equal(t, 4*time.Second, resolveMaxAge(fresh, fresh.Status.GetLastHandledReconcileRequest(), interval, now), "a new resource takes resolutions made since its creation, less the timestamp's second of precision")

	neverResolved := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	})
	assert.Equal(t, interval/2, resolveMaxAge(neverResolved, neverResolved.Status.GetLastHandledReconcileRequest(), interval, now), "a resource that never resolved (no tag in its range) still sees new tags every interval")

	justCreated := pkg(func(p *v1alpha1.Package) {
		p.Status.LastAttemptedRevision = ""
		p.CreationTimestamp = metav1.NewTime(now)
	})
	assert.Zero(t, resolveMaxAge(justCreated, justCreated.Status.GetLastHandledReconcileRequest(), interval, now), "within the creation second nothing cached is fresh enough")

	changed := pkg(func(p *v1alpha1.Package) {
		p.Generation = 2
		p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	})
	assert.Zero(t, resolveMaxAge(changed, changed.Status.GetLastHandledReconcileRequest(), interval, now), "a changed spec asks the registry")
}

// TestPackageRevisionChoice: the digest a Package resolves its spec.image to, with and without
// spec.semver, and the reason when there is none to take.
func TestPackageRevisionChoice(t *testing.T) {
	t.Parallel()
	f := verifytest.NewFixture(t)
	creds := verifytest.UserCredentials("reader")
	// One repository with versions 1.0.0, 1.2.0 and 2.0.0, each its own image, and a tag that
	// is not a version.
	push := func(content string, tags ...string) string {
		t.Helper()
		img := verifytest.BuildPackage(t, content)
		var refs []source.Reference
		for _, tg := range tags {
			ref, err := source.ParseReference(f.Reg.Host + "/addons/versions:" + tg)
			require.NoError(t, err)
			refs = append(refs, ref)
		}
		_, err := f.Src.Push(t.Context(), img, refs, creds)
		require.NoError(t, err)
		return img.Digest
	}
	zero := push("zero", "1.0.0")
	first := push("one", "1.2.0")
	second := push("two", "2.0.0", "latest")
	image := f.Reg.Host + "/addons/versions:latest"

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
		{name: "a tag that is not there: pull failed", image: f.Reg.Host + "/addons/versions:absent", reason: v1alpha1.PullFailedReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &packageSteps[*v1alpha1.Package]{source: f.Src}
			ref, err := source.ParseReference(tt.image)
			require.NoError(t, err)
			spec := &v1alpha1.PackageSpec{Image: tt.image, Semver: tt.semver}
			got, err := r.resolve(t.Context(), r.source, spec, ref, creds, 0)
			if tt.reason != "" {
				require.Error(t, err)
				assert.Equal(t, tt.reason, reconciler.ReasonFor(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantDigest, got.Digest)
		})
	}
}
