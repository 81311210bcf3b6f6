package e2e

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// TestUserRegistry runs a Package through the controller from the registry the user points the
// tests at ($PKGSYNC_TEST_REGISTRY, zot for instance), where the rest of the suite uses its own
// Distribution registry: a version range read from the tag listing, a signature verified, the
// highest matching tag applied. Repositories are the run's own, so it passes again on the same
// registry.
func TestUserRegistry(t *testing.T) {
	t.Parallel()
	if testenv.UserRegistry() == "" {
		t.Skipf("$%s is not set: set it to host:port of a registry on this machine (zot, for instance), or to %q (make test-zot), to run a package from it", testenv.RegistryEnv, testenv.ZotRegistry)
	}
	host := testenv.UserRegistryHost(t)
	repo := host + "/" + testenv.Repository(t, "versions")
	digests := map[string]string{}
	for _, tag := range []string{"1.0.0", "1.1.0", "2.0.0"} {
		digests[tag] = pushPackageTo(t, writePackage(t, versionedPackage(tag)), repo+":"+tag)
	}
	key, pub := signingKey(t)
	ref, err := source.ParseReference(repo + ":1.1.0")
	require.NoError(t, err)
	_, err = signature.Sign(t.Context(), suite.source, ref, key, nil)
	require.NoError(t, err)

	ns := newNamespace(t)
	putKeys(t, ns, map[string][]byte{"cosign.pub": pub})
	pkg := newPackage(ns, "versioned", repo, "")
	pkg.Spec.Semver = ">=1.0.0 <2.0.0"
	pkg.Spec.Interval = &metav1.Duration{Duration: time.Hour}
	pkg.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
	createPackage(t, pkg)
	waitForApplied(t, pkg, "1.1.0", digests["1.1.0"])
}
