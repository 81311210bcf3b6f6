package controller

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
)

// fixtureVerifier is a verifier over f's Secrets and policies, for namespace.
func fixtureVerifier(t *testing.T, f *verifyFixture, namespace string, require bool, policies ...*v1alpha1.TrustPolicy) *signatureVerifier {
	t.Helper()
	scheme := runtime.NewScheme()
	assert.NoError(t, clientgoscheme.AddToScheme(scheme))
	assert.NoError(t, v1alpha1.AddToScheme(scheme))
	objs := append([]client.Object(nil), f.objects...)
	for _, p := range policies {
		objs = append(objs, p)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(copies(objs)...).Build()
	return newSignatureVerifier(c, c, f.src, namespace, require)
}

// TestVerificationOutcome: what verification makes of a digest, per signature, key Secret,
// TrustPolicy and --require-signatures: nil, a VerificationFailed or VerificationRequired
// refusal (naming what failed), or an error of the caller.
func TestVerificationOutcome(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t)
	policy := func(secret string) *v1alpha1.TrustPolicy {
		return &v1alpha1.TrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform"},
			Spec: v1alpha1.TrustPolicySpec{Repositories: []string{f.reg.host + "/addons"}, Verify: *keysOf(secret)}}
	}
	tests := []struct {
		name      string
		spec      *v1alpha1.Verification
		namespace string // of the resource, "" for a cluster-scoped one
		ctrlNS    string
		require   bool
		policy    *v1alpha1.TrustPolicy
		ref       source.Reference

		reason string // the stage error's reason, "" for nil
		says   []string
	}{
		{name: "signed with a key of the Secret", spec: keysOf("keys-a"), namespace: tenantNamespace, ref: f.signed},
		{name: "signed with a key the Secret does not hold", spec: keysOf("keys-b"), namespace: tenantNamespace, ref: f.signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"[b.pub]", "Secret team/keys-b", "spec.verify"}},
		{name: "unsigned", spec: keysOf("keys-a"), namespace: tenantNamespace, ref: f.unsigned,
			reason: v1alpha1.VerificationFailedReason, says: []string{"[a.pub]", source.SignatureTag(f.unsigned.Digest)}},
		{name: "the Secret is missing", spec: keysOf("absent"), namespace: tenantNamespace, ref: f.signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"read the verification Secret", "team/absent"}},
		{name: "the Secret holds no key", spec: keysOf("no-keys"), namespace: tenantNamespace, ref: f.signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"no key ending in .pub", "[README]"}},
		{name: "keyless without a trusted root",
			spec:      &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "keys-a"}, MatchOIDCIdentity: []v1alpha1.OIDCIdentityMatch{{Issuer: "https://issuer", Subject: "me"}}},
			namespace: tenantNamespace, ref: f.signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{v1alpha1.TrustedRootKey}},
		{name: "a cluster-scoped resource's Secret is the controller's namespace's", spec: keysOf("keys-a"), ctrlNS: controllerNamespace, ref: f.signed},
		{name: "a cluster-scoped resource and a controller without namespace", spec: keysOf("keys-a"), ref: f.signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"--namespace"}},
		{name: "nothing to verify with, signatures not required", namespace: tenantNamespace, ref: f.unsigned},
		{name: "nothing to verify with, signatures required", namespace: tenantNamespace, require: true, ref: f.unsigned,
			reason: v1alpha1.VerificationRequiredReason, says: []string{"--require-signatures", "spec.verify"}},
		{name: "signatures required, a policy covers the image and verifies it", namespace: tenantNamespace, ctrlNS: controllerNamespace, require: true,
			policy: policy("keys-a"), ref: f.signed},
		{name: "a policy refuses what the tenant's keys verify", spec: keysOf("keys-a"), namespace: tenantNamespace, ctrlNS: controllerNamespace,
			policy: policy("keys-b"), ref: f.signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{`TrustPolicy "platform"`, "pkgsync-system/keys-b"}},
		{name: "the tenant's keys refuse what a policy verifies", spec: keysOf("keys-b"), namespace: tenantNamespace, ctrlNS: controllerNamespace,
			policy: policy("keys-a"), ref: f.signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"spec.verify", "team/keys-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var policies []*v1alpha1.TrustPolicy
			if tt.policy != nil {
				policies = append(policies, tt.policy)
			}
			v := fixtureVerifier(t, f, tt.ctrlNS, tt.require, policies...)
			err := v.check(t.Context(), tt.spec, tt.namespace, "spec.verify", tt.ref, userCredentials("reader"))
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			var stage *reconciler.StageError
			require.ErrorAs(t, err, &stage)
			assert.Equal(t, tt.reason, stage.Reason)
			for _, s := range tt.says {
				assert.Contains(t, err.Error(), s)
			}
		})
	}

	t.Run("a tag not resolved yet is not verified", func(t *testing.T) {
		t.Parallel()
		tag := f.signed
		tag.Digest = ""
		err := fixtureVerifier(t, f, "", false).check(t.Context(), keysOf("keys-a"), tenantNamespace, "spec.verify", tag, userCredentials("reader"))
		require.ErrorContains(t, err, "no digest")
		var stage *reconciler.StageError
		assert.False(t, errors.As(err, &stage), "the caller's error, not the resource's")
	})
}

// TestVerificationCache: a digest verified with a key set is remembered; a caller asking about
// it again proves its own access to the repository instead of reading the signature, and one
// that cannot read the repository is refused; a refusal is not remembered.
func TestVerificationCache(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t)
	v := fixtureVerifier(t, f, controllerNamespace, false)
	check := func(spec *v1alpha1.Verification, user string, ref source.Reference) error {
		return v.check(t.Context(), spec, tenantNamespace, "spec.verify", ref, userCredentials(user))
	}

	sigs := f.reg.sigRequests.Load()
	require.NoError(t, check(keysOf("keys-a"), "reader", f.signed))
	assert.Greater(t, f.reg.sigRequests.Load(), sigs, "the first verification reads the signature")

	sigs = f.reg.sigRequests.Load()
	require.NoError(t, check(keysOf("keys-a"), "reader", f.signed))
	assert.Equal(t, sigs, f.reg.sigRequests.Load(), "a verdict reached is not reached again")

	requests := f.reg.requests.Load()
	err := check(keysOf("keys-a"), "intruder", f.signed)
	var stage *reconciler.StageError
	require.ErrorAs(t, err, &stage, "a caller that cannot read the repository does not learn the verdict")
	assert.Equal(t, v1alpha1.VerificationFailedReason, stage.Reason)
	assert.Contains(t, err.Error(), "spec.verify: the keys [a.pub]")
	assert.Greater(t, f.reg.requests.Load(), requests, "the caller's access is asked of the registry")
	assert.Equal(t, sigs, f.reg.sigRequests.Load(), "not the signature")

	// Another key set is another verdict.
	require.Error(t, check(keysOf("keys-b"), "reader", f.signed))
	sigs = f.reg.sigRequests.Load()
	require.Error(t, check(keysOf("keys-b"), "reader", f.signed))
	assert.Greater(t, f.reg.sigRequests.Load(), sigs, "a refusal is not remembered: the signature is read again")
}

// TestVerificationCacheExpires: a verdict stands for the verify interval and no longer. Within
// it the signature is not read again, so a deleted signature still counts as there; after it the
// signature is read again, and a deleted one refuses the digest.
func TestVerificationCacheExpires(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	v := fixtureVerifier(t, f, controllerNamespace, false).withInterval(10 * time.Minute)
	v.clock = clk
	check := func() error {
		return v.check(t.Context(), keysOf("keys-a"), tenantNamespace, "spec.verify", f.signed, userCredentials("reader"))
	}

	sigs := f.reg.sigRequests.Load()
	require.NoError(t, check())
	require.Greater(t, f.reg.sigRequests.Load(), sigs, "the first verification reads the signature")

	// Revoke: delete the signature from the registry.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete,
		"http://"+f.reg.host+"/v2/addons/signed/manifests/"+source.SignatureTag(f.signed.Digest), nil)
	require.NoError(t, err)
	req.SetBasicAuth("reader", "secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Less(t, resp.StatusCode, 300, "delete the signature")

	clk.SetTime(clk.Now().Add(10*time.Minute - time.Second))
	sigs = f.reg.sigRequests.Load()
	require.NoError(t, check(), "within the interval the verdict stands")
	assert.Equal(t, sigs, f.reg.sigRequests.Load(), "within the interval the signature is not read again")

	clk.SetTime(clk.Now().Add(2 * time.Second))
	err = check()
	assert.Greater(t, f.reg.sigRequests.Load(), sigs, "after the interval the signature is read again")
	var stage *reconciler.StageError
	require.ErrorAs(t, err, &stage, "a deleted signature refuses the digest once the verdict expired")
	assert.Equal(t, v1alpha1.VerificationFailedReason, stage.Reason)
}
