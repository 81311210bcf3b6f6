package verify

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
	"pkgsync.dev/pkgsync/internal/verify/verifytest"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// fixtureVerifier is a verifier over f's Secrets and policies, for namespace.
func fixtureVerifier(t *testing.T, f *verifytest.Fixture, namespace string, require bool, policies ...*v1alpha1.TrustPolicy) *Verifier {
	t.Helper()
	scheme := runtime.NewScheme()
	assert.NoError(t, clientgoscheme.AddToScheme(scheme))
	assert.NoError(t, v1alpha1.AddToScheme(scheme))
	objs := append([]client.Object(nil), f.Objects...)
	for _, p := range policies {
		objs = append(objs, p)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(verifytest.Copies(objs)...).Build()
	return NewVerifier(c, c, namespace, require)
}

// TestVerificationOutcome: what verification makes of a digest, per signature, key Secret,
// TrustPolicy and --require-signatures: nil, a VerificationFailed or VerificationRequired
// refusal (naming what failed), or an error of the caller.
func TestVerificationOutcome(t *testing.T) {
	t.Parallel()
	f := verifytest.NewFixture(t)
	policy := func(secret string) *v1alpha1.TrustPolicy {
		return &v1alpha1.TrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform"},
			Spec: v1alpha1.TrustPolicySpec{Repositories: []string{f.Reg.Host + "/addons"}, Verify: *verifytest.KeysOf(secret)}}
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
		{name: "signed with a key of the Secret", spec: verifytest.KeysOf("keys-a"), namespace: verifytest.TenantNamespace, ref: f.Signed},
		{name: "signed with a key the Secret does not hold", spec: verifytest.KeysOf("keys-b"), namespace: verifytest.TenantNamespace, ref: f.Signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"[b.pub]", "Secret team/keys-b", "spec.verify"}},
		{name: "unsigned", spec: verifytest.KeysOf("keys-a"), namespace: verifytest.TenantNamespace, ref: f.Unsigned,
			reason: v1alpha1.VerificationFailedReason, says: []string{"[a.pub]", signature.SignatureTag(f.Unsigned.Digest)}},
		{name: "the Secret is missing", spec: verifytest.KeysOf("absent"), namespace: verifytest.TenantNamespace, ref: f.Signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"read the verification Secret", "team/absent"}},
		{name: "the Secret holds no key", spec: verifytest.KeysOf("no-keys"), namespace: verifytest.TenantNamespace, ref: f.Signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"no key ending in .pub", "[README]"}},
		{name: "keyless without a trusted root",
			spec:      &v1alpha1.Verification{SecretRef: meta.LocalObjectReference{Name: "keys-a"}, MatchOIDCIdentity: []v1alpha1.OIDCIdentityMatch{{Issuer: "https://issuer", Subject: "me"}}},
			namespace: verifytest.TenantNamespace, ref: f.Signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{v1alpha1.TrustedRootKey}},
		{name: "a cluster-scoped resource's Secret is the controller's namespace's", spec: verifytest.KeysOf("keys-a"), ctrlNS: verifytest.ControllerNamespace, ref: f.Signed},
		{name: "a cluster-scoped resource and a controller without namespace", spec: verifytest.KeysOf("keys-a"), ref: f.Signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{"--namespace"}},
		{name: "nothing to verify with, signatures not required", namespace: verifytest.TenantNamespace, ref: f.Unsigned},
		{name: "nothing to verify with, signatures required", namespace: verifytest.TenantNamespace, require: true, ref: f.Unsigned,
			reason: v1alpha1.VerificationRequiredReason, says: []string{"--require-signatures", "spec.verify"}},
		{name: "signatures required, a policy covers the image and verifies it", namespace: verifytest.TenantNamespace, ctrlNS: verifytest.ControllerNamespace, require: true,
			policy: policy("keys-a"), ref: f.Signed},
		{name: "a policy refuses what the tenant's keys verify", spec: verifytest.KeysOf("keys-a"), namespace: verifytest.TenantNamespace, ctrlNS: verifytest.ControllerNamespace,
			policy: policy("keys-b"), ref: f.Signed,
			reason: v1alpha1.VerificationFailedReason, says: []string{`TrustPolicy "platform"`, "pkgsync-system/keys-b"}},
		{name: "the tenant's keys refuse what a policy verifies", spec: verifytest.KeysOf("keys-b"), namespace: verifytest.TenantNamespace, ctrlNS: verifytest.ControllerNamespace,
			policy: policy("keys-a"), ref: f.Signed,
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
			err := v.Check(t.Context(), f.Src, tt.spec, tt.namespace, "spec.verify", tt.ref, verifytest.UserCredentials("reader"))
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
		tag := f.Signed
		tag.Digest = ""
		err := fixtureVerifier(t, f, "", false).Check(t.Context(), f.Src, verifytest.KeysOf("keys-a"), verifytest.TenantNamespace, "spec.verify", tag, verifytest.UserCredentials("reader"))
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
	f := verifytest.NewFixture(t)
	v := fixtureVerifier(t, f, verifytest.ControllerNamespace, false)
	check := func(spec *v1alpha1.Verification, user string, ref source.Reference) error {
		return v.Check(t.Context(), f.Src, spec, verifytest.TenantNamespace, "spec.verify", ref, verifytest.UserCredentials(user))
	}

	sigs := f.Reg.SigRequests.Load()
	require.NoError(t, check(verifytest.KeysOf("keys-a"), "reader", f.Signed))
	assert.Greater(t, f.Reg.SigRequests.Load(), sigs, "the first verification reads the signature")

	sigs = f.Reg.SigRequests.Load()
	require.NoError(t, check(verifytest.KeysOf("keys-a"), "reader", f.Signed))
	assert.Equal(t, sigs, f.Reg.SigRequests.Load(), "a verdict reached is not reached again")

	requests := f.Reg.Requests.Load()
	err := check(verifytest.KeysOf("keys-a"), "intruder", f.Signed)
	var stage *reconciler.StageError
	require.ErrorAs(t, err, &stage, "a caller that cannot read the repository does not learn the verdict")
	assert.Equal(t, v1alpha1.VerificationFailedReason, stage.Reason)
	assert.Contains(t, err.Error(), "spec.verify: the keys [a.pub]")
	assert.Greater(t, f.Reg.Requests.Load(), requests, "the caller's access is asked of the registry")
	assert.Equal(t, sigs, f.Reg.SigRequests.Load(), "not the signature")

	// Another key set is another verdict.
	require.Error(t, check(verifytest.KeysOf("keys-b"), "reader", f.Signed))
	sigs = f.Reg.SigRequests.Load()
	require.Error(t, check(verifytest.KeysOf("keys-b"), "reader", f.Signed))
	assert.Greater(t, f.Reg.SigRequests.Load(), sigs, "a refusal is not remembered: the signature is read again")
}

// TestVerificationCacheExpires: a verdict stands for the verify interval and no longer. Within
// it the signature is not read again, so a deleted signature still counts as there; after it the
// signature is read again, and a deleted one refuses the digest.
func TestVerificationCacheExpires(t *testing.T) {
	t.Parallel()
	f := verifytest.NewFixture(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	v := fixtureVerifier(t, f, verifytest.ControllerNamespace, false).WithInterval(10 * time.Minute)
	v.clock = clk
	check := func() error {
		return v.Check(t.Context(), f.Src, verifytest.KeysOf("keys-a"), verifytest.TenantNamespace, "spec.verify", f.Signed, verifytest.UserCredentials("reader"))
	}

	sigs := f.Reg.SigRequests.Load()
	require.NoError(t, check())
	require.Greater(t, f.Reg.SigRequests.Load(), sigs, "the first verification reads the signature")

	// Revoke: delete the signature from the registry.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete,
		"http://"+f.Reg.Host+"/v2/addons/signed/manifests/"+signature.SignatureTag(f.Signed.Digest), nil)
	require.NoError(t, err)
	req.SetBasicAuth("reader", "secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Less(t, resp.StatusCode, 300, "delete the signature")

	clk.SetTime(clk.Now().Add(10*time.Minute - time.Second))
	sigs = f.Reg.SigRequests.Load()
	require.NoError(t, check(), "within the interval the verdict stands")
	assert.Equal(t, sigs, f.Reg.SigRequests.Load(), "within the interval the signature is not read again")

	clk.SetTime(clk.Now().Add(2 * time.Second))
	err = check()
	assert.Greater(t, f.Reg.SigRequests.Load(), sigs, "after the interval the signature is read again")
	var stage *reconciler.StageError
	require.ErrorAs(t, err, &stage, "a deleted signature refuses the digest once the verdict expired")
	assert.Equal(t, v1alpha1.VerificationFailedReason, stage.Reason)
}
