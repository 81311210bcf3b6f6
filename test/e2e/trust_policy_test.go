package e2e

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// putSecret creates or replaces a Secret.
func putSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := suite.mgmtClient.Create(t.Context(), secret); err != nil {
		require.NoError(t, suite.mgmtClient.Update(t.Context(), secret))
	}
}

// newTrustPolicy creates a TrustPolicy whose keys are the Secret secretName of the controller's
// namespace, and deletes it when the test ends. Policies are cluster-scoped and every controller
// of the suite reads them: tests give each one repositories of their own.
func newTrustPolicy(t *testing.T, name, secretName string, repositories ...string) *v1alpha1.TrustPolicy {
	t.Helper()
	policy := &v1alpha1.TrustPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TrustPolicySpec{
			Repositories: repositories,
			Verify:       v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: secretName}},
		},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), policy))
	t.Cleanup(func() {
		require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(context.WithoutCancel(t.Context()), policy)))
	})
	return policy
}

// A TrustPolicy pins the signers of the repositories it covers, whatever a tenant's Package
// trusts: a Package that verifies with its own key in its own namespace is refused once a
// policy covers its image (at once, not at its next interval, and although its own verdict is
// cached), and installs once the policy's key signs the digest; a Package without spec.verify
// is verified against the policy, which also satisfies --require-signatures; an image two
// policies cover (one of keys, one keyless) must meet both; a ClusterPackage is covered too; an
// image outside the policies' prefixes (a sibling whose name merely starts the same) is not
// affected.
func TestTrustPolicyPinsTenantPackages(t *testing.T) {
	t.Parallel()
	const shard = "trust-policy"
	controllerNS := newNamespace(t)
	runShardController(t, shard, func(o *reconciler.Options) {
		o.Namespace = controllerNS
		o.RequireSignatures = true
	})

	ns := newNamespace(t)
	prefix := suite.registry.Host + "/e2e/" + ns + "/platform"
	tenantKey, tenantPub := signingKey(t)
	platformKey, platformPub := signingKey(t)
	putKeys(t, ns, map[string][]byte{"cosign.pub": tenantPub})
	putSecret(t, controllerNS, "platform-keys", map[string][]byte{"cosign.pub": platformPub})
	labels := map[string]string{shardLabel: shard}
	sign := func(image, digest string, key *signature.SigningKey) {
		t.Helper()
		ref, err := source.ParseReference(image)
		require.NoError(t, err)
		_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest), key, nil)
		require.NoError(t, err)
	}
	newTenantPackage := func(name, image string, verify bool) *v1alpha1.Package {
		pkg := newPackage(ns, name, image, "")
		pkg.Labels = labels
		if verify {
			pkg.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
		}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
		t.Cleanup(func() { deleteAndWaitVerify(t, pkg) })
		return pkg
	}

	// Before any policy: the tenant's own key is all it takes (and its verdict is cached).
	addon := prefix + "/addon:v1"
	digest1 := pushPackage(t, writePackage(t, versionedPackage("1")), "e2e/"+ns+"/platform/addon:v1")
	sign(addon, digest1, tenantKey)
	pkg := newTenantPackage("addon", addon, true)
	waitForReady(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	// (1) The policy comes: the tenant's key no longer suffices, without a reconcile request
	// (the Package's interval is an hour).
	policyName := "platform-" + ns[len(ns)-6:]
	newTrustPolicy(t, policyName, "platform-keys", prefix)
	ready := waitForReady(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, `TrustPolicy "`+policyName+`"`)
	assert.Contains(t, ready.Message, "no signature verifies with the keys [cosign.pub]")
	assert.Contains(t, ready.Message, "Secret "+controllerNS+"/platform-keys")
	assert.Equal(t, digest1, pkg.Status.LastAppliedRevision, "what was applied stays")

	// (2) Signed with the policy's key too: installed. The tenant's spec.verify still counts:
	// a digest the policy's key alone signs is refused by it.
	sign(addon, digest1, platformKey)
	waitForVerdict(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	digest2 := pushPackage(t, writePackage(t, versionedPackage("2")), "e2e/"+ns+"/platform/addon:v1")
	sign(addon, digest2, platformKey)
	verdict := waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, verdict.Message, "spec.verify: the keys [cosign.pub] of Secret "+ns+"/signing-keys")
	assert.NotContains(t, verdict.Message, "TrustPolicy")
	sign(addon, digest2, tenantKey)
	waitForVerdict(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, "2", configMapData(t, ns, "signed")["version"])

	// A tampered tag signed by the tenant alone is refused, naming the policy.
	digest3 := pushPackage(t, writePackage(t, versionedPackage("3")), "e2e/"+ns+"/platform/addon:v1")
	sign(addon, digest3, tenantKey)
	verdict = waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, verdict.Message, `TrustPolicy "`+policyName+`"`)
	assert.Contains(t, verdict.Message, digest3)
	assert.Equal(t, "2", configMapData(t, ns, "signed")["version"], "nothing of the refused digest is applied")

	// (3) No spec.verify at all, under the policy: verified against it, not refused for
	// --require-signatures; unsigned is refused, signed by the policy's key installed.
	otherNS := newNamespace(t)
	other := prefix + "/other:v1"
	otherDigest := pushPackage(t, writePackage(t, versionedPackage("other")), "e2e/"+ns+"/platform/other:v1")
	unverified := newPackage(otherNS, "other", other, "")
	unverified.Labels = labels
	require.NoError(t, suite.mgmtClient.Create(t.Context(), unverified))
	t.Cleanup(func() { deleteAndWaitVerify(t, unverified) })
	ready = waitForReady(t, unverified, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, `TrustPolicy "`+policyName+`"`)
	assert.Contains(t, ready.Message, "no signature found")
	assert.Empty(t, unverified.Status.LastAppliedRevision)
	sign(other, otherDigest, platformKey)
	waitForVerdict(t, unverified, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	// Two policies cover one image (the second keyless, for prefix/keyless): both must be met.
	sigstore, err := testenv.NewSigstore()
	require.NoError(t, err)
	trusted, err := sigstore.TrustedRoot()
	require.NoError(t, err)
	putSecret(t, controllerNS, "sigstore-root", map[string][]byte{v1alpha1.TrustedRootKey: trusted})
	keylessName := "keyless-" + ns[len(ns)-6:]
	keyless := &v1alpha1.TrustPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: keylessName},
		Spec: v1alpha1.TrustPolicySpec{
			Repositories: []string{prefix + "/keyless"},
			Verify: v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "sigstore-root"},
				MatchOIDCIdentity: []v1alpha1.OIDCIdentityMatch{{Issuer: `https://issuer\.example`, Subject: `release@example\.com`}}},
		},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), keyless))
	t.Cleanup(func() {
		require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(context.WithoutCancel(t.Context()), keyless)))
	})
	keylessRepo := "e2e/" + ns + "/platform/keyless/app"
	attachKeyless := func(digest, identity string) {
		t.Helper()
		bundle, err := sigstore.SignImage(suite.registry.Host+"/"+keylessRepo, digest, signature.SignPredicateType, identity, "https://issuer.example")
		require.NoError(t, err)
		_, err = testenv.AttachBundle(t.Context(), suite.registry.Host, keylessRepo, digest, bundle, signature.SignPredicateType)
		require.NoError(t, err)
	}
	keylessImage := suite.registry.Host + "/" + keylessRepo + ":v1"
	keylessDigest := pushPackage(t, writePackage(t, versionedPackage("keyless")), keylessRepo+":v1")
	attachKeyless(keylessDigest, "release@example.com")
	both := newPackage(newNamespace(t), "both", keylessImage, "")
	both.Labels = labels
	require.NoError(t, suite.mgmtClient.Create(t.Context(), both))
	t.Cleanup(func() { deleteAndWaitVerify(t, both) })
	ready = waitForReady(t, both, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, `TrustPolicy "`+policyName+`"`, "the keyless policy is met, the key policy is not")
	sign(keylessImage, keylessDigest, platformKey)
	verdict = waitForVerdict(t, both, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Contains(t, verdict.Message, keylessDigest)
	keylessDigest2 := pushPackage(t, writePackage(t, versionedPackage("keyless 2")), keylessRepo+":v1")
	sign(keylessImage, keylessDigest2, platformKey)
	attachKeyless(keylessDigest2, "intruder@example.com")
	verdict = waitForVerdict(t, both, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, verdict.Message, `TrustPolicy "`+keylessName+`"`)
	assert.Contains(t, verdict.Message, "no identity matches")
	assert.Contains(t, verdict.Message, "the trusted root of Secret "+controllerNS+"/sigstore-root")

	// A ClusterPackage is covered the same way: its spec.verify (the operator's, in the
	// controller's namespace) does not replace the policy.
	clusterImage := prefix + "/cluster:v1"
	clusterDigest := pushPackage(t, writePackage(t, versionedPackage("cluster")), "e2e/"+ns+"/platform/cluster:v1")
	sign(clusterImage, clusterDigest, tenantKey)
	putKeys(t, controllerNS, map[string][]byte{"cosign.pub": tenantPub})
	cpkg := &v1alpha1.ClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "trust-" + ns[len(ns)-8:], Labels: labels},
		Spec: v1alpha1.PackageSpec{Image: clusterImage,
			Verify: &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), cpkg))
	t.Cleanup(func() { deleteAndWait(t, cpkg) })
	ready = waitForReady(t, cpkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, `TrustPolicy "`+policyName+`"`)
	assert.Contains(t, ready.Message, clusterDigest)

	// (4) Outside the policy (platformer is not under platform): the tenant's own key is
	// enough, and without spec.verify --require-signatures refuses as before.
	outside := suite.registry.Host + "/e2e/" + ns + "/platformer:v1"
	outsideDigest := pushPackage(t, writePackage(t, versionedPackage("outside")), "e2e/"+ns+"/platformer:v1")
	sign(outside, outsideDigest, tenantKey)
	outsideNS := newNamespace(t)
	putKeys(t, outsideNS, map[string][]byte{"cosign.pub": tenantPub})
	own := newPackage(outsideNS, "own", outside, "")
	own.Labels = labels
	own.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), own))
	t.Cleanup(func() { deleteAndWaitVerify(t, own) })
	waitForReady(t, own, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	bare := newPackage(outsideNS, "bare", outside, "")
	bare.Labels = labels
	require.NoError(t, suite.mgmtClient.Create(t.Context(), bare))
	t.Cleanup(func() { deleteAndWaitVerify(t, bare) })
	waitForReady(t, bare, metav1.ConditionFalse, v1alpha1.VerificationRequiredReason)
}

// (6) A fleet whose image a TrustPolicy covers verifies each resolved digest against the
// policy (its Secret in the controller's namespace) as well as the template's spec.verify,
// before the digest becomes the target: a digest the template's key signs and the policy's
// does not reaches no member, and the fleet's status names the policy.
func TestTrustPolicyHoldsFleetTarget(t *testing.T) {
	t.Parallel()
	const shard = "trust-fleet"
	controllerNS := newNamespace(t)
	runShardController(t, shard, func(o *reconciler.Options) { o.Namespace = controllerNS })

	hcNamespace := newNamespace(t)
	repo := "e2e/" + hcNamespace + "/platform/fleet"
	image := suite.registry.Host + "/" + repo + ":v1"
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	templateKey, templatePub := signingKey(t)
	platformKey, platformPub := signingKey(t)
	putKeys(t, controllerNS, map[string][]byte{"cosign.pub": templatePub})
	putSecret(t, controllerNS, "platform-keys", map[string][]byte{"cosign.pub": platformPub})
	// The fleet copies signing-keys to its members' namespaces.
	clusters := newFleetClusters(t, hcNamespace, hcNamespace, "", "")
	policyName := "fleet-" + hcNamespace[len(hcNamespace)-6:]
	newTrustPolicy(t, policyName, "platform-keys", suite.registry.Host+"/e2e/"+hcNamespace+"/platform")

	digest1 := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")
	for _, key := range []*signature.SigningKey{templateKey, platformKey} {
		_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest1), key, nil)
		require.NoError(t, err)
	}
	fleet := verifiedFleet("trusted-"+hcNamespace[len(hcNamespace)-8:], shard, hcNamespace, image)
	newFleet(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest1)

	// The template's key alone: the target stays, no member moves.
	before := fleetMembers(t, t.Context(), fleet.Name)
	require.Len(t, before, 2)
	digest2 := pushPackage(t, writePackage(t, versionedPackage("2")), repo+":v1")
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest2), templateKey, nil)
	require.NoError(t, err)
	waitForFleetRequest(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.VerificationFailedReason, digest1)
	msg := conditions.GetMessage(got, meta.ReadyCondition)
	assert.Contains(t, msg, `TrustPolicy "`+policyName+`"`)
	assert.Contains(t, msg, digest2)
	assert.Contains(t, msg, "Secret "+controllerNS+"/platform-keys")
	assert.Equal(t, digest1, got.Status.Target.Digest, "the target stays the one the policy accepted")
	after := fleetMembers(t, t.Context(), fleet.Name)
	for ns, m := range before {
		assert.Equal(t, m.Spec.Image, after[ns].Spec.Image, "member %s untouched", ns)
		assert.Equal(t, "1", configMapData(t, ns, "signed")["version"])
	}

	// Signed by the policy's key as well: rolled out.
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest2), platformKey, nil)
	require.NoError(t, err)
	waitForFleetRequest(t, fleet)
	waitForFleet(t, fleet.Name, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason, digest2)
	for cp := range clusters {
		assert.Equal(t, "2", configMapData(t, cp, "signed")["version"])
	}
}
