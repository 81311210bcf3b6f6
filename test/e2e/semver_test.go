package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// pushVersions pushes one package per tag to repo (each tag its own digest) and returns the
// digests by tag.
func pushVersions(t *testing.T, repo string, tags ...string) map[string]string {
	t.Helper()
	digests := map[string]string{}
	for _, tag := range tags {
		digests[tag] = pushPackage(t, writePackage(t, versionedPackage(tag)), repo+":"+tag)
	}
	return digests
}

// newSemverPackage follows a repository of the suite's registry with a version range.
func newSemverPackage(ns, repo, semver string, interval time.Duration) *v1alpha1.Package {
	pkg := newPackage(ns, "versioned", suite.registry.Host+"/"+repo, "")
	pkg.Spec.Semver = semver
	pkg.Spec.Interval = &metav1.Duration{Duration: interval}
	return pkg
}

// waitForApplied waits until the Package has applied tag with digest and its ConfigMap says so.
func waitForApplied(t *testing.T, pkg *v1alpha1.Package, tag, digest string) {
	t.Helper()
	eventually(t, func(a *attempt) {
		c := readyCondition(a, pkg)
		if !assert.NotNil(a, c) {
			return
		}
		assert.Equal(a, metav1.ConditionTrue, c.Status, c.Message)
		assert.Equal(a, tag, pkg.Status.LastAppliedTag)
		assert.Equal(a, digest, pkg.Status.LastAppliedRevision)
		assert.Equal(a, tag, pkg.Status.LastAttemptedTag)
		assert.Equal(a, digest, pkg.Status.LastAttemptedRevision)
		assert.Equal(a, tag, configMapData(a, pkg.Namespace, "signed")["version"])
	}, "%s applies %s", pkg.Name, tag)
}

// A Package with spec.semver installs the highest tag its range accepts, pre-releases only when
// the range names one; a range nothing matches says so, and a new tag is picked up at the next
// interval, without a reconcile request.
func TestPackageSemver(t *testing.T) {
	t.Parallel()
	repo := "e2e/" + newNamespace(t) + "/versions"
	digests := pushVersions(t, repo, "1.0.0", "v1.1.0", "1.2.0-rc.1", "2.0.0", "latest")

	stable := newSemverPackage(newNamespace(t), repo, ">=1.0.0 <2.0.0", 2*time.Second)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), stable))
	waitForApplied(t, stable, "v1.1.0", digests["v1.1.0"])

	pre := newSemverPackage(newNamespace(t), repo, ">=1.2.0-0 <2.0.0", time.Hour)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pre))
	waitForApplied(t, pre, "1.2.0-rc.1", digests["1.2.0-rc.1"])

	// A repository of its own, so that no other Package's listing refreshes the one it sees.
	laterRepo := "e2e/" + newNamespace(t) + "/later"
	pushVersions(t, laterRepo, "1.0.0", "v2.0.0", "2.1.0-rc.1")
	none := newSemverPackage(newNamespace(t), laterRepo, ">=3.0.0", 2*time.Second)
	require.NoError(t, suite.mgmtClient.Create(t.Context(), none))
	cond := waitForReady(t, none, metav1.ConditionFalse, v1alpha1.NoMatchingVersionReason)
	assert.Contains(t, cond.Message, `no tag matches the version range ">=3.0.0"`)
	assert.Contains(t, cond.Message, suite.registry.Host+"/"+laterRepo)
	assert.Contains(t, cond.Message, "the highest [2.1.0-rc.1 v2.0.0 1.0.0]")
	assert.False(t, conditions.IsStalled(none), "a new tag can end it: not stalled")

	// New tags, seen by the Packages at their next interval.
	digests = pushVersions(t, repo, "1.3.0")
	waitForApplied(t, stable, "1.3.0", digests["1.3.0"])
	// The Package has looked more than once (a listing right after its creation is not reused),
	// and must still see a tag pushed after the listings it has.
	eventually(t, func(a *attempt) {
		assert.GreaterOrEqual(a, suite.registryRequests.tagLists(laterRepo), 3)
	}, "the Package lists its repository at its interval")
	digests = pushVersions(t, laterRepo, "3.1.0")
	waitForApplied(t, none, "3.1.0", digests["3.1.0"])
}

// spec.semver names the repository alone: the API server refuses a tag or digest with it, and a
// range that does not parse stalls the Package.
func TestPackageSemverValidation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := suite.registry.Host + "/e2e/" + ns + "/versions"
	for _, image := range []string{repo + ":v1", repo + "@sha256:" + zeroHex, repo + ":v1@sha256:" + zeroHex} {
		pkg := newPackage(ns, "refused", image, "")
		pkg.Spec.Semver = ">=1.0.0"
		err := suite.mgmtClient.Create(t.Context(), pkg)
		require.Error(t, err, image)
		assert.Contains(t, err.Error(), "spec.semver chooses the tag: spec.image must name the repository without a tag or digest", image)
	}

	pkg := newPackage(ns, "invalid", repo, "")
	pkg.Spec.Semver = "newest please"
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.InvalidVersionRangeReason)
	assert.Contains(t, cond.Message, `spec.semver: version range "newest please"`)
	assert.True(t, conditions.IsStalled(pkg))
	assert.Zero(t, suite.registryRequests.tagLists("e2e/"+ns+"/versions"), "nothing asked of the registry")
}

// zeroHex is a well-formed sha256 hex digest.
const zeroHex = "0000000000000000000000000000000000000000000000000000000000000000"

// Packages following one repository share its tag listing: a reconcile request on all of them
// costs one listing, and one more after a new tag is pushed, which all of them pick up.
func TestSemverListingShared(t *testing.T) {
	t.Parallel()
	repo := "e2e/" + newNamespace(t) + "/shared"
	digests := pushVersions(t, repo, "1.0.0", "1.1.0")
	const followers = 3
	pkgs := make([]*v1alpha1.Package, followers)
	for i := range pkgs {
		pkgs[i] = newSemverPackage(newNamespace(t), repo, "^1", time.Hour)
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkgs[i]))
	}
	for _, pkg := range pkgs {
		waitForApplied(t, pkg, "1.1.0", digests["1.1.0"])
	}

	requestAll := func() {
		t.Helper()
		token := time.Now().Format(time.RFC3339Nano)
		for _, pkg := range pkgs {
			require.NoError(t, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), pkg))
			patch := client.MergeFrom(pkg.DeepCopy())
			metav1.SetMetaDataAnnotation(&pkg.ObjectMeta, meta.ReconcileRequestAnnotation, token)
			require.NoError(t, suite.mgmtClient.Patch(t.Context(), pkg, patch))
		}
		for _, pkg := range pkgs {
			eventually(t, func(a *attempt) {
				readyCondition(a, pkg)
				assert.Equal(a, token, pkg.Status.LastHandledReconcileAt)
			}, "%s/%s handles the request", pkg.Namespace, pkg.Name)
		}
	}

	before := suite.registryRequests.tagLists(repo)
	requestAll()
	assert.Equal(t, before+1, suite.registryRequests.tagLists(repo), "one listing for %d Packages", followers)

	digests = pushVersions(t, repo, "1.2.0")
	requestAll()
	for _, pkg := range pkgs {
		waitForApplied(t, pkg, "1.2.0", digests["1.2.0"])
	}
	assert.Equal(t, before+2, suite.registryRequests.tagLists(repo), "one more listing for the new tag")
}

// A registry that answers the tag listing with page after page of one 4 MiB tag (which once
// drove the controller to 12 GiB) gets the Package Ready=False, PullFailed, with the bound it
// broke named, after one page per listing.
func TestPackageSemverListingBounded(t *testing.T) {
	t.Parallel()
	var pages atomic.Int64
	tag := strings.Repeat("a", 4<<20-64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/v2/":
		case "/v2/attack/tags/list":
			i := pages.Add(1)
			if i%64 != 0 {
				w.Header().Set("Link", fmt.Sprintf(`</v2/attack/tags/list?n=1000&last=p%d>; rel="next"`, i))
			}
			assert.NoError(t, json.NewEncoder(w).Encode(map[string]any{"name": "attack", "tags": []string{tag}}))
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(srv.Close)
	pkg := newPackage(newNamespace(t), "endless", strings.TrimPrefix(srv.URL, "http://")+"/attack", "")
	pkg.Spec.Semver = ">=1.0.0"
	pkg.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	createPackage(t, pkg)
	cond := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.PullFailedReason)
	assert.Contains(t, cond.Message, "limit exceeded: a tag of 4194240 characters, over 128")
	assert.Contains(t, cond.Message, "list tags of "+strings.TrimPrefix(srv.URL, "http://")+"/attack")
	assert.Less(t, pages.Load(), int64(10), "each listing stops at the first page")
}
