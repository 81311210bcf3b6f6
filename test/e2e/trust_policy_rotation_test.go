package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// A TrustPolicy's Secret is watched: rotating it to a key that does not verify the installed
// digest refuses the Package at once, without a reconcile request and although its interval is
// an hour (so polling cannot explain it); rotating back installs it again.
func TestTrustPolicyRotation(t *testing.T) {
	t.Parallel()
	const shard = "trust-policy-rotation"
	controllerNS := newNamespace(t)
	runShardController(t, shard, func(o *reconciler.Options) { o.Namespace = controllerNS })

	ns := newNamespace(t)
	prefix := suite.registry.Host + "/e2e/" + ns + "/rotation"
	oldKey, oldPub := signingKey(t)
	_, newPub := signingKey(t)
	putSecret(t, controllerNS, "rotating-keys", map[string][]byte{"cosign.pub": oldPub})
	newTrustPolicy(t, "rotation-"+ns[len(ns)-6:], "rotating-keys", prefix)

	image := prefix + "/addon:v1"
	digest := pushPackage(t, writePackage(t, versionedPackage("1")), "e2e/"+ns+"/rotation/addon:v1")
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest), oldKey, nil)
	require.NoError(t, err)

	pkg := newPackage(ns, "addon", image, "")
	pkg.Labels = map[string]string{shardLabel: shard}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	t.Cleanup(func() { deleteAndWaitVerify(t, pkg) })
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	require.Equal(t, metav1.Duration{Duration: 3600e9}, *pkg.Spec.Interval, "an hour: only a wake explains a prompt verdict")

	putSecret(t, controllerNS, "rotating-keys", map[string][]byte{"cosign.pub": newPub})
	ready := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "Secret "+controllerNS+"/rotating-keys")
	assert.Equal(t, digest, pkg.Status.LastAppliedRevision, "what was applied stays")

	// Back (the watch or the retry after the failure brings it).
	putSecret(t, controllerNS, "rotating-keys", map[string][]byte{"cosign.pub": oldPub})
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
}
