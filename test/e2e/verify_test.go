package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
	"pkgsync.dev/pkgsync/test/testenv"
)

// versionedPackage is one ConfigMap (named signed) whose data says which version it is.
func versionedPackage(version string) map[string]string {
	return map[string]string{
		"manifest.yaml": "apiVersion: pkgsync.dev/v1alpha1\nkind: PackageManifest\nmetadata:\n  name: signed\nspec:\n  phases:\n  - name: config\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: signed\n  annotations:\n    pkgsync.dev/phase: config\ndata:\n" +
			"  version: \"" + version + "\"\n",
	}
}

// signingKey makes a cosign-format key pair; it returns the loaded private key and the public PEM.
func signingKey(t *testing.T) (*signature.SigningKey, []byte) {
	t.Helper()
	priv, pub, err := signature.GenerateSigningKey([]byte("e2e"))
	require.NoError(t, err)
	key, err := signature.LoadSigningKey(priv, []byte("e2e"))
	require.NoError(t, err)
	return key, pub
}

// waitForVerdict requests a reconcile and waits for Ready to have status and reason; it returns
// the Ready condition.
func waitForVerdict(t *testing.T, pkg *v1alpha1.Package, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	requestReconcile(t, pkg)
	token := pkg.Annotations[meta.ReconcileRequestAnnotation]
	var ready metav1.Condition
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var got v1alpha1.Package
		if !assert.NoError(ct, suite.mgmtClient.Get(t.Context(), client.ObjectKeyFromObject(pkg), &got)) {
			return
		}
		assert.Equal(ct, token, got.Status.LastHandledReconcileAt, "reconcile request handled")
		c := apimeta.FindStatusCondition(got.Status.Conditions, meta.ReadyCondition)
		if assert.NotNil(ct, c) {
			assert.Equal(ct, status, c.Status, c.Message)
			assert.Equal(ct, reason, c.Reason, c.Message)
			ready = *c
		}
		*pkg = got
	}, timeout, interval)
	return ready
}

func putKeys(t *testing.T, ns string, keys map[string][]byte) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signing-keys"}, Data: keys}
	if err := suite.mgmtClient.Create(t.Context(), secret); err != nil {
		require.NoError(t, suite.mgmtClient.Update(t.Context(), secret))
	}
}

// A Package with spec.verify applies only digests signed by a key of its Secret: a tampered tag
// (a new, unsigned digest) or a signature by another key is refused and the last good revision
// stays; a key added to the Secret counts at the next reconcile.
func TestPackageVerification(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "e2e/" + ns + "/signed"
	image := suite.registry.Host + "/" + repo + ":v1"
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	keyA, pubA := signingKey(t)
	keyB, pubB := signingKey(t)

	digest1 := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest1), keyA, nil)
	require.NoError(t, err)
	putKeys(t, ns, map[string][]byte{"cosign.pub": pubA})

	pkg := newPackage(ns, "signed", image, "")
	pkg.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	t.Cleanup(func() { deleteAndWaitVerify(t, pkg) })
	waitForVerdict(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, digest1, pkg.Status.LastAppliedRevision)
	assert.Equal(t, "1", configMapData(t, ns, "signed")["version"])

	// Tampered: a new digest under the signed tag, unsigned.
	digest2 := pushPackage(t, writePackage(t, versionedPackage("2")), repo+":v1")
	ready := waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "no signature found")
	assert.Contains(t, ready.Message, digest2)
	assert.Contains(t, ready.Message, "Secret "+ns+"/signing-keys")
	assert.Equal(t, digest1, pkg.Status.LastAppliedRevision, "the last good revision stays")
	assert.Equal(t, "1", configMapData(t, ns, "signed")["version"], "nothing of the unsigned digest is applied")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var events corev1.EventList
		if !assert.NoError(ct, suite.mgmtClient.List(t.Context(), &events, client.InNamespace(ns))) {
			return
		}
		found := false
		for _, e := range events.Items {
			found = found || (e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.VerificationFailedReason && e.InvolvedObject.Name == "signed")
		}
		assert.True(ct, found, "a Warning event VerificationFailed")
	}, timeout, interval)

	// Signed, but by a key the Secret does not hold.
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest2), keyB, nil)
	require.NoError(t, err)
	ready = waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "no signature verifies with the keys [cosign.pub]")
	assert.Equal(t, digest1, pkg.Status.LastAppliedRevision)

	// Key rotation: the new key in the Secret is read at the next reconcile.
	putKeys(t, ns, map[string][]byte{"cosign.pub": pubB})
	waitForVerdict(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, digest2, pkg.Status.LastAppliedRevision)
	assert.Equal(t, "2", configMapData(t, ns, "signed")["version"])

	// A Secret without public keys says what it lacks.
	putKeys(t, ns, map[string][]byte{"cosign.key": []byte("private")})
	ready = waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "has no key ending in .pub (it has [cosign.key])")
}

// deleteAndWaitVerify deletes the Package and waits until its finalizer has run. It runs as a
// cleanup, after the test's context is cancelled.
func deleteAndWaitVerify(t *testing.T, pkg *v1alpha1.Package) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(t, client.IgnoreNotFound(suite.mgmtClient.Delete(ctx, pkg)))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var got v1alpha1.Package
		err := suite.mgmtClient.Get(ctx, client.ObjectKeyFromObject(pkg), &got)
		assert.True(ct, apierrors.IsNotFound(err), "deleted: %v", err)
	}, timeout, interval)
}

// TestRequireSignatures: with --require-signatures a Package without spec.verify is refused
// before anything of it is pulled, and one with spec.verify and a signed digest is installed.
func TestRequireSignatures(t *testing.T) {
	t.Parallel()
	runShardController(t, "require-signatures", func(o *reconciler.Options) { o.RequireSignatures = true })

	ns := newNamespace(t)
	repo := "e2e/" + ns + "/required"
	image := suite.registry.Host + "/" + repo + ":v1"
	digest := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")

	unverified := newPackage(ns, "unverified", image, "")
	unverified.Labels = map[string]string{shardLabel: "require-signatures"}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), unverified))
	t.Cleanup(func() { deleteAndWaitVerify(t, unverified) })
	cond := waitForReady(t, unverified, metav1.ConditionFalse, v1alpha1.VerificationRequiredReason)
	assert.Contains(t, cond.Message, "--require-signatures")
	assert.Empty(t, unverified.Status.LastAppliedRevision)

	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	key, pub := signingKey(t)
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest), key, nil)
	require.NoError(t, err)
	putKeys(t, ns, map[string][]byte{"cosign.pub": pub})
	verified := newPackage(ns, "verified", image, "")
	verified.Labels = map[string]string{shardLabel: "require-signatures"}
	verified.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), verified))
	t.Cleanup(func() { deleteAndWaitVerify(t, verified) })
	waitForReady(t, verified, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)

	// A fleet whose members would be refused is refused itself, before its tag is resolved.
	fleet := &v1alpha1.HostedClusterPackage{
		ObjectMeta: metav1.ObjectMeta{Name: "unverified-" + ns[len(ns)-8:], Labels: map[string]string{shardLabel: "require-signatures"}},
		Spec: v1alpha1.HostedClusterPackageSpec{
			HostedClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.pkgsync.dev/fleet": ns}},
			Template:              v1alpha1.PackageTemplate{Spec: v1alpha1.PackageSpec{Image: image}},
		},
	}
	newFleet(t, fleet)
	got := waitForFleet(t, fleet.Name, metav1.ConditionFalse, v1alpha1.VerificationRequiredReason, "")
	assert.True(t, conditions.IsStalled(got))
	assert.Contains(t, conditions.GetMessage(got, meta.ReadyCondition), "spec.template.spec.verify")
	assert.Nil(t, got.Status.Target, "the tag is not resolved")
}

// A digest is verified once per key set: reconciles and other resources with the same keys
// reuse the verdict (no request for the signatures), and a key added to the Secret is a new key
// set, verified once more.
func TestVerificationCachedPerKeySet(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "e2e/" + ns + "/cached"
	image := suite.registry.Host + "/" + repo + ":v1"
	ref, err := source.ParseReference(image)
	require.NoError(t, err)
	digest := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")
	keyA, pubA := signingKey(t)
	_, pubB := signingKey(t)
	_, err = signature.Sign(t.Context(), suite.source, ref.WithDigest(digest), keyA, nil)
	require.NoError(t, err)
	signatures := func() int {
		return suite.registryRequests.count(http.MethodGet, "/v2/"+repo+"/manifests/"+signature.SignatureTag(digest))
	}
	before := signatures()

	verified := func(ns string) *v1alpha1.Package {
		pkg := newPackage(ns, "signed", image, "")
		pkg.Spec.Verify = &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "signing-keys"}}
		require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
		t.Cleanup(func() { deleteAndWaitVerify(t, pkg) })
		return pkg
	}
	putKeys(t, ns, map[string][]byte{"cosign.pub": pubA})
	first := verified(ns)
	waitForVerdict(t, first, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	perVerification := signatures() - before
	require.Positive(t, perVerification, "the signatures were read")

	for range 3 {
		waitForVerdict(t, first, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	}
	other := newNamespace(t)
	putKeys(t, other, map[string][]byte{"same-key.pub": pubA})
	second := verified(other)
	waitForVerdict(t, second, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, before+perVerification, signatures(), "reconciles and a resource with the same keys reuse the verdict")

	putKeys(t, ns, map[string][]byte{"cosign.pub": pubA, "next.pub": pubB})
	for range 3 {
		waitForVerdict(t, first, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	}
	assert.Equal(t, before+2*perVerification, signatures(), "a new key set is verified once")
}

// Keyless: a Package with spec.verify.matchOIDCIdentity applies a digest signed with a
// certificate of the Secret's trusted root for a matching identity, offline; another identity
// or another root is refused, and the Secret must hold the root.
func TestPackageKeylessVerification(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "e2e/" + ns + "/keyless"
	image := suite.registry.Host + "/" + repo + ":v1"
	digest := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")
	sigstore, err := testenv.NewSigstore()
	require.NoError(t, err)
	trusted, err := sigstore.TrustedRoot()
	require.NoError(t, err)
	other, err := testenv.NewSigstore()
	require.NoError(t, err)
	otherTrusted, err := other.TrustedRoot()
	require.NoError(t, err)
	bundle, err := sigstore.SignImage(suite.registry.Host+"/"+repo, digest, signature.SignPredicateType, "release@example.com", "https://issuer.example")
	require.NoError(t, err)
	_, err = testenv.AttachBundle(t.Context(), suite.registry.Host, repo, digest, bundle, signature.SignPredicateType)
	require.NoError(t, err)

	pkg := keylessPackage(t, ns, image, trusted, digest)

	// Another identity: refused, the last good revision kept.
	updateObject(t, pkg, func() { pkg.Spec.Verify.MatchOIDCIdentity[0].Subject = `ci@example\.com` })
	ready := waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "no identity matches")
	assert.Contains(t, ready.Message, "the trusted root of Secret "+ns+"/signing-keys and spec.verify.matchOIDCIdentity")
	assert.Equal(t, digest, pkg.Status.LastAppliedRevision)

	// The right identity with another root: refused.
	updateObject(t, pkg, func() { pkg.Spec.Verify.MatchOIDCIdentity[0].Subject = `release@example\.com` })
	putKeys(t, ns, map[string][]byte{v1alpha1.TrustedRootKey: otherTrusted})
	ready = waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "transparency log")

	// No trusted root in the Secret: said so.
	putKeys(t, ns, map[string][]byte{"cosign.pub": trusted})
	ready = waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "has no trusted_root.json")

	putKeys(t, ns, map[string][]byte{v1alpha1.TrustedRootKey: trusted})
	waitForVerdict(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
}

// Keyless signatures as cosign 2 stores them (the .sig tag, the certificate and the Rekor bundle
// in the layer's annotations) verify in the controller too; a signature of another identity in
// the same format is refused.
func TestPackageKeylessCosign2Verification(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	repo := "e2e/" + ns + "/keyless-cosign2"
	image := suite.registry.Host + "/" + repo + ":v1"
	digest := pushPackage(t, writePackage(t, versionedPackage("1")), repo+":v1")
	sigstore, err := testenv.NewSigstore()
	require.NoError(t, err)
	trusted, err := sigstore.TrustedRoot()
	require.NoError(t, err)
	sig, err := sigstore.SignImageCosign2(suite.registry.Host+"/"+repo, digest, "release@example.com", "https://issuer.example", testenv.Cosign2Options{})
	require.NoError(t, err)
	require.NoError(t, testenv.AttachCosign2Signatures(t.Context(), suite.registry.Host, repo, digest, sig))

	pkg := keylessPackage(t, ns, image, trusted, digest)

	// Another identity signs the next digest: refused, the last good revision kept.
	digest2 := pushPackage(t, writePackage(t, versionedPackage("2")), repo+":v1")
	sig, err = sigstore.SignImageCosign2(suite.registry.Host+"/"+repo, digest2, "intruder@example.com", "https://issuer.example", testenv.Cosign2Options{})
	require.NoError(t, err)
	require.NoError(t, testenv.AttachCosign2Signatures(t.Context(), suite.registry.Host, repo, digest2, sig))
	ready := waitForVerdict(t, pkg, metav1.ConditionFalse, v1alpha1.VerificationFailedReason)
	assert.Contains(t, ready.Message, "no identity matches")
	assert.Contains(t, ready.Message, signature.SignatureTag(digest2))
	assert.Equal(t, digest, pkg.Status.LastAppliedRevision)
	assert.Equal(t, "1", configMapData(t, ns, "signed")["version"])
}

// keylessPackage creates a Package of image that verifies keyless signatures of
// release@example.com from https://issuer.example with the trusted root, and waits until it is
// Ready on digest.
func keylessPackage(t *testing.T, ns, image string, trusted []byte, digest string) *v1alpha1.Package {
	t.Helper()
	putKeys(t, ns, map[string][]byte{v1alpha1.TrustedRootKey: trusted})
	pkg := newPackage(ns, "signed", image, "")
	pkg.Spec.Verify = &v1alpha1.Verification{
		SecretRef:         meta.LocalObjectReference{Name: "signing-keys"},
		MatchOIDCIdentity: []v1alpha1.OIDCIdentityMatch{{Issuer: `https://issuer\.example`, Subject: `release@example\.com`}},
	}
	require.NoError(t, suite.mgmtClient.Create(t.Context(), pkg))
	t.Cleanup(func() { deleteAndWaitVerify(t, pkg) })
	waitForVerdict(t, pkg, metav1.ConditionTrue, v1alpha1.ReconciliationSucceededReason)
	assert.Equal(t, digest, pkg.Status.LastAppliedRevision)
	return pkg
}
