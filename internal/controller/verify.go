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

// signatureVerifier checks spec.verify: the keys come from the resource's Secret on every
// reconcile (so a rotation counts at once), and a digest verified with a key set is remembered,
// so the registry is asked once per digest and key set.
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
	secretName := ns + "/" + spec.SecretRef.Name
	keys, err := v.keys(ctx, client.ObjectKey{Namespace: ns, Name: spec.SecretRef.Name})
	if err != nil {
		return &stageError{reason: v1alpha1.VerificationFailedReason, err: err}
	}
	cacheKey := ref.Name() + "@" + ref.Digest + "\x00" + keys.ID()
	if _, ok := v.verified.Get(cacheKey); ok {
		return nil
	}
	verified, err := v.source.Verify(ctx, ref, keys, creds)
	if err != nil {
		return &stageError{reason: v1alpha1.VerificationFailedReason,
			err: fmt.Errorf("%w (spec.verify: the keys of Secret %s)", withRegistryHint(err), secretName)}
	}
	v.verified.Add(cacheKey, verified.Key)
	ctrl.LoggerFrom(ctx).V(1).Info("signature verified", "revision", ref.Digest, "key", verified.Key, "secret", secretName)
	return nil
}

// keys reads the public keys of a Secret: every data key ending in .pub.
func (v *signatureVerifier) keys(ctx context.Context, key client.ObjectKey) (*source.PublicKeys, error) {
	var secret corev1.Secret
	if err := v.apiReader.Get(ctx, key, &secret); err != nil {
		return nil, fmt.Errorf("read the verification keys of spec.verify.secretRef %s: %w", key, err)
	}
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
