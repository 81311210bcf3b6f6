package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/lru"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/source"
)

// verifiedEntries bounds the digests remembered as verified, per repository and key set.
const verifiedEntries = 4096

// signatureVerifier checks spec.verify: the keys (or the trusted root) come from the
// resource's Secret on every reconcile (so a rotation counts at once), and a digest verified
// with a key set (or a trusted root and identities) is remembered, so the registry is asked
// once per digest and key set.
type signatureVerifier struct {
	// apiReader reads the key Secrets without caching every Secret of the cluster.
	apiReader client.Reader
	source    *source.Client
	// namespace holds the key Secrets of cluster-scoped resources.
	namespace string
	// require refuses resources without spec.verify (--require-signatures).
	require  bool
	verified *lru.Cache // of the verifying key's name, keyed by repository, digest and key set ID
}

func newSignatureVerifier(apiReader client.Reader, src *source.Client, namespace string, require bool) *signatureVerifier {
	return &signatureVerifier{apiReader: apiReader, source: src, namespace: namespace, require: require, verified: lru.New(verifiedEntries)}
}

// verify checks the signature of ref (pinned to a digest) when spec.verify is set. Failures are
// VerificationFailed stage errors naming the Secret, its keys and what failed. Without
// spec.verify it refuses the resource when signatures are required.
func (v *signatureVerifier) verify(ctx context.Context, obj packageObject, ref source.Reference, creds source.Credentials) error {
	spec := obj.GetSpec().Verify
	if spec == nil {
		if v.require {
			return &stageError{reason: v1alpha1.VerificationRequiredReason,
				err: fmt.Errorf("the controller runs with --require-signatures and spec.verify is not set: name a Secret of cosign public keys in spec.verify.secretRef to install %s", ref.Name())}
		}
		return nil
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = v.namespace
	}
	key := client.ObjectKey{Namespace: ns, Name: spec.SecretRef.Name}
	secretName := key.String()
	var secret corev1.Secret
	if err := v.apiReader.Get(ctx, key, &secret); err != nil {
		return &stageError{reason: v1alpha1.VerificationFailedReason, err: fmt.Errorf("read the verification Secret of spec.verify.secretRef %s: %w", key, err)}
	}
	var (
		trustID, trust string
		check          func() (*source.Verification, error)
	)
	if len(spec.MatchOIDCIdentity) > 0 {
		policy, err := keylessPolicy(key, &secret, spec.MatchOIDCIdentity)
		if err != nil {
			return &stageError{reason: v1alpha1.VerificationFailedReason, err: err}
		}
		trustID, trust = "keyless\x00"+policy.ID(), "the trusted root of Secret "+secretName+" and spec.verify.matchOIDCIdentity"
		check = func() (*source.Verification, error) { return v.source.VerifyKeyless(ctx, ref, policy, creds) }
	} else {
		keys, err := publicKeys(key, &secret)
		if err != nil {
			return &stageError{reason: v1alpha1.VerificationFailedReason, err: err}
		}
		trustID, trust = keys.ID(), "the keys of Secret "+secretName
		check = func() (*source.Verification, error) { return v.source.Verify(ctx, ref, keys, creds) }
	}
	cacheKey := ref.Name() + "@" + ref.Digest + "\x00" + trustID
	if _, ok := v.verified.Get(cacheKey); ok {
		return nil
	}
	verified, err := check()
	if err != nil {
		return &stageError{reason: v1alpha1.VerificationFailedReason,
			err: fmt.Errorf("%w (spec.verify: %s)", withRegistryHint(err), trust)}
	}
	v.verified.Add(cacheKey, verified.Key)
	ctrl.LoggerFrom(ctx).V(1).Info("signature verified", "revision", ref.Digest, "signer", verified.Key, "secret", secretName)
	return nil
}

// keylessPolicy reads the trusted root of a Secret and the identities of spec.verify.
func keylessPolicy(key client.ObjectKey, secret *corev1.Secret, match []v1alpha1.OIDCIdentityMatch) (*source.KeylessPolicy, error) {
	trusted, ok := secret.Data[v1alpha1.TrustedRootKey]
	if !ok {
		return nil, fmt.Errorf("the Secret %s (spec.verify.secretRef) has no %s, which keyless verification (spec.verify.matchOIDCIdentity) needs: add the Sigstore trusted root (cosign trusted-root create)", key, v1alpha1.TrustedRootKey)
	}
	ids := make([]source.OIDCIdentity, len(match))
	for i, m := range match {
		ids[i] = source.OIDCIdentity{Issuer: m.Issuer, Subject: m.Subject}
	}
	policy, err := source.NewKeylessPolicy(trusted, ids)
	if err != nil {
		return nil, fmt.Errorf("spec.verify.matchOIDCIdentity with the Secret %s: %w", key, err)
	}
	return policy, nil
}

// publicKeys reads the public keys of a Secret: every data key ending in .pub.
func publicKeys(key client.ObjectKey, secret *corev1.Secret) (*source.PublicKeys, error) {
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
		return nil, fmt.Errorf("the Secret %s (spec.verify.secretRef) has no key ending in %s (it has %v): add the cosign public key as cosign.pub", key, v1alpha1.PublicKeySuffix, others)
	}
	keys, err := source.ParsePublicKeys(named)
	if err != nil {
		return nil, fmt.Errorf("the Secret %s (spec.verify.secretRef): %w", key, err)
	}
	return keys, nil
}
