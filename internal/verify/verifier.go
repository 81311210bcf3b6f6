package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/source"
	"pkgsync.dev/pkgsync/source/signature"
)

// verifiedEntries bounds the digests remembered as verified, per repository and key set.
const verifiedEntries = 4096

// Verifier checks the TrustPolicies that cover an image, then spec.verify: the keys
// (or the trusted root) come from the policy's or the resource's Secret on every reconcile (so
// a rotation counts at once), and a digest verified with a key set (or a trusted root and
// identities) is remembered for the verify interval, so the registry is asked once per digest,
// key set and interval, and a signature deleted from the registry counts within one interval.
// The signatures are read through the source client each caller passes (its view, with its
// HostedCluster's mirrors, source.Client.WithCallerMirrors).
type Verifier struct {
	// apiReader reads the key Secrets without caching every Secret of the cluster.
	apiReader client.Reader
	// policies reads TrustPolicies from the manager's cache (every policy, whatever the shard).
	policies client.Reader
	// namespace holds the key Secrets of cluster-scoped resources and of TrustPolicies.
	namespace string
	// Require refuses resources without spec.verify (--require-signatures) that no policy covers.
	Require bool
	// verified holds verdicts (the verifying key's name and when), keyed by repository, digest and the trust ID:
	// the key set's (or the trusted root's and identities') digest, whoever named them. A
	// verdict with a tenant's keys is a verdict with those keys only: a policy's keys are
	// another ID, verified on their own.
	verified *lru.Cache
	// ttl bounds how long a verdict stands (--verify-interval): a signature deleted, or a
	// key's signature replaced, counts at the first check after it.
	ttl   time.Duration
	clock clock.PassiveClock
}

// verdict is a digest verified: by which key, and when (it stands for the verify interval).
type verdict struct {
	signer string
	at     time.Time
}

// defaultVerifyInterval is how long a verdict stands when Options.VerifyInterval is not set.
const defaultVerifyInterval = 10 * time.Minute

func NewVerifier(apiReader, policies client.Reader, namespace string, require bool) *Verifier {
	return &Verifier{apiReader: apiReader, policies: policies, namespace: namespace, Require: require,
		verified: lru.New(verifiedEntries), ttl: defaultVerifyInterval, clock: clock.RealClock{}}
}

// WithInterval makes verdicts stand for interval (--verify-interval); zero keeps the default.
func (v *Verifier) WithInterval(interval time.Duration) *Verifier {
	if interval > 0 {
		v.ttl = interval
	}
	return v
}

// Check verifies ref with every TrustPolicy that covers it (in name order, the first refusal
// wins), then with spec, the verification settings at field of a resource in namespace ("" for
// a cluster-scoped resource: its Secret is in the controller's namespace). The policies come
// first: a tenant's own settings, whatever they are, neither replace nor precede them. The
// signatures are read through src, the caller's source client (or view of it), with creds.
func (v *Verifier) Check(ctx context.Context, src *source.Client, spec *v1alpha1.Verification, namespace, field string, ref source.Reference, creds source.Credentials) error {
	policies, err := coveringPolicies(ctx, v.policies, ref)
	if err != nil {
		return err
	}
	for i := range policies {
		if err := v.checkWith(ctx, src, &policies[i].Spec.Verify, v.namespace, trustPolicyField(policies[i].Name), ref, creds); err != nil {
			return err
		}
	}
	if spec == nil {
		if len(policies) > 0 {
			return nil
		}
		return v.refuseUnverified(field, ref.Name())
	}
	if namespace == "" {
		namespace = v.namespace
	}
	return v.checkWith(ctx, src, spec, namespace, field, ref, creds)
}

// checkWith verifies ref with spec, whose Secret is in namespace; field names spec in messages.
func (v *Verifier) checkWith(ctx context.Context, src *source.Client, spec *v1alpha1.Verification, namespace, field string, ref source.Reference, creds source.Credentials) error {
	if namespace == "" {
		// Only a controller started without --namespace (tests, a local run) gets here.
		return &reconciler.StageError{Reason: v1alpha1.VerificationFailedReason,
			Err: fmt.Errorf("%s.secretRef is read in the controller's namespace, and the controller runs without one (--namespace)", field)}
	}
	key := client.ObjectKey{Namespace: namespace, Name: spec.SecretRef.Name}
	secretName := key.String()
	var secret corev1.Secret
	if err := v.apiReader.Get(ctx, key, &secret); err != nil {
		return &reconciler.StageError{Reason: v1alpha1.VerificationFailedReason, Err: fmt.Errorf("read the verification Secret of %s.secretRef %s: %w", field, key, err)}
	}
	var (
		trustID, trust string
		verify         func() (*signature.Verification, error)
	)
	if len(spec.MatchOIDCIdentity) > 0 {
		policy, err := keylessPolicy(key, &secret, field, spec.MatchOIDCIdentity)
		if err != nil {
			return &reconciler.StageError{Reason: v1alpha1.VerificationFailedReason, Err: err}
		}
		trustID, trust = "keyless\x00"+policy.ID(), "the trusted root of Secret "+secretName+" and "+field+".matchOIDCIdentity"
		verify = func() (*signature.Verification, error) {
			return signature.VerifyKeyless(ctx, src, ref, policy, creds)
		}
	} else {
		keys, err := publicKeys(key, &secret, field)
		if err != nil {
			return &reconciler.StageError{Reason: v1alpha1.VerificationFailedReason, Err: err}
		}
		trustID, trust = keys.ID(), fmt.Sprintf("the keys %v of Secret %s", keys.Names(), secretName)
		verify = func() (*signature.Verification, error) { return signature.Verify(ctx, src, ref, keys, creds) }
	}
	if ref.Digest == "" {
		// Verdicts are cached per digest: a tag would make one verdict stand for every digest
		// the tag is moved to.
		return fmt.Errorf("verify %s: no digest to verify (the tag must be resolved first)", ref)
	}
	cacheKey := ref.Name() + "@" + ref.Digest + "\x00" + trustID
	if cached, ok := v.verified.Get(cacheKey); ok && v.clock.Since(cached.(verdict).at) < v.ttl {
		// A verdict was reached with the credentials of whoever verified first. It tells
		// whether a digest is signed, which a caller that may not read the repository must not
		// learn from the cache: it proves its own access first (free within source's access
		// TTL; a tag it resolved itself counts). Its HostedCluster's own mirrors prove none
		// (source.Authorize does not ask them): a caller that reads through them verifies for
		// itself instead.
		err := src.Authorize(ctx, ref, creds)
		if err == nil {
			return nil
		}
		if !src.HasCallerMirrors() {
			return &reconciler.StageError{Reason: v1alpha1.VerificationFailedReason,
				Err: fmt.Errorf("%w (%s: %s)", reconciler.WithRegistryHint(err), field, trust)}
		}
	}
	verified, err := verify()
	if err != nil {
		return &reconciler.StageError{Reason: v1alpha1.VerificationFailedReason,
			Err: fmt.Errorf("%w (%s: %s)", reconciler.WithRegistryHint(err), field, trust)}
	}
	v.verified.Add(cacheKey, verdict{signer: verified.Key, at: v.clock.Now()})
	ctrl.LoggerFrom(ctx).V(1).Info("signature verified", "revision", ref.Digest, "signer", verified.Key, "secret", secretName)
	return nil
}

// Required refuses, when signatures are required (--require-signatures), verification settings
// (at field) that are not set for ref, unless a TrustPolicy covers it (it is then verified
// against the policy).
func (v *Verifier) Required(ctx context.Context, spec *v1alpha1.Verification, field string, ref source.Reference) error {
	if spec != nil || !v.Require {
		return nil
	}
	policies, err := coveringPolicies(ctx, v.policies, ref)
	if err != nil {
		return err
	}
	if len(policies) > 0 {
		return nil
	}
	return v.refuseUnverified(field, ref.String())
}

// refuseUnverified refuses, when signatures are required, an image that neither verification
// settings (at field) nor a TrustPolicy verify.
func (v *Verifier) refuseUnverified(field, image string) error {
	if !v.Require {
		return nil
	}
	return &reconciler.StageError{Reason: v1alpha1.VerificationRequiredReason,
		Err: fmt.Errorf("the controller runs with --require-signatures, %s is not set and no TrustPolicy covers %s: name a Secret of cosign public keys in %s.secretRef to install it", field, image, field)}
}

// keylessPolicy reads the trusted root of a Secret and the identities of spec.verify.
func keylessPolicy(key client.ObjectKey, secret *corev1.Secret, field string, match []v1alpha1.OIDCIdentityMatch) (*signature.KeylessPolicy, error) {
	trusted, ok := secret.Data[v1alpha1.TrustedRootKey]
	if !ok {
		return nil, fmt.Errorf("the Secret %s (%s.secretRef) has no %s, which keyless verification (%s.matchOIDCIdentity) needs: add the Sigstore trusted root (cosign trusted-root create)", key, field, v1alpha1.TrustedRootKey, field)
	}
	ids := make([]signature.OIDCIdentity, len(match))
	for i, m := range match {
		ids[i] = signature.OIDCIdentity{Issuer: m.Issuer, Subject: m.Subject}
	}
	policy, err := signature.NewKeylessPolicy(trusted, ids)
	if err != nil {
		return nil, fmt.Errorf("%s.matchOIDCIdentity with the Secret %s: %w", field, key, err)
	}
	return policy, nil
}

// publicKeys reads the public keys of a Secret: every data key ending in .pub.
func publicKeys(key client.ObjectKey, secret *corev1.Secret, field string) (*signature.PublicKeys, error) {
	named := map[string][]byte{}
	var others []string
	for name, data := range secret.Data {
		if strings.HasSuffix(name, v1alpha1.PublicKeySuffix) {
			named[name] = data
		} else {
			others = append(others, name)
		}
	}
	if len(named) == 0 {
		slices.Sort(others)
		return nil, fmt.Errorf("the Secret %s (%s.secretRef) has no key ending in %s (it has %v): add the cosign public key as cosign.pub", key, field, v1alpha1.PublicKeySuffix, others)
	}
	keys, err := signature.ParsePublicKeys(named)
	if err != nil {
		return nil, fmt.Errorf("the Secret %s (%s.secretRef): %w", key, field, err)
	}
	return keys, nil
}
