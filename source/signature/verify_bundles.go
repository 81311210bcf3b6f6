package signature

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"oras.land/oras-go/v2/registry/remote"

	"pkgsync.dev/pkgsync/source"
)

// verifyKeyedBundles looks for signatures made with a key in cosign 3's format (its default):
// sigstore bundles among the image's referrers, as for keyless signatures, whose DSSE
// signature one of keys made. As with the .sig tag, the keys are the whole trust: log entries
// and timestamps in the bundle are not required. It returns the name of the key that verified
// and the bundle's manifest, or what failed per bundle (nothing when no bundle refers to the
// image). Errors are those of the listing.
func verifyKeyedBundles(ctx context.Context, c *source.Client, repo *remote.Repository, ref source.Reference, dgst string, keys *PublicKeys) (string, source.Reference, []string, error) {
	var none source.Reference
	d, err := digest.Parse(dgst)
	if err != nil {
		return "", none, nil, err
	}
	raw, err := hex.DecodeString(d.Encoded())
	if err != nil {
		return "", none, nil, err
	}
	bundles, more, err := listBundles(ctx, repo, d)
	if err != nil {
		return "", none, nil, fmt.Errorf("list the image's referrers: %w", c.Explain(ref, err))
	}
	verifiers := make([]*verify.Verifier, len(keys.keys))
	for i, k := range keys.keys {
		material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
			return root.NewExpiringKey(k.verifier, time.Time{}, time.Time{}), nil
		})
		if verifiers[i], err = verify.NewVerifier(material, verify.WithNoObserverTimestamps()); err != nil {
			return "", none, nil, err
		}
	}
	var failures []string
	for i, desc := range bundles {
		b, err := fetchBundle(ctx, repo, desc)
		if err != nil {
			failures = append(failures, fmt.Sprintf("bundle %d (%s): %v", i+1, desc.Digest, err))
			continue
		}
		var errs []string
		for j, v := range verifiers {
			res, err := v.Verify(b, verify.NewPolicy(verify.WithArtifactDigest(d.Algorithm().String(), raw), verify.WithKey()))
			if err == nil {
				err = checkSignatureStatement(res)
			}
			if err == nil {
				return keys.keys[j].name, source.Reference{Registry: ref.Registry, Repository: ref.Repository, Digest: desc.Digest.String()}, nil, nil
			}
			errs = append(errs, fmt.Sprintf("%s: %v", keys.keys[j].name, err))
		}
		failures = append(failures, fmt.Sprintf("bundle %d (%s): %s", i+1, desc.Digest, strings.Join(errs, ", ")))
	}
	if more {
		failures = append(failures, fmt.Sprintf("more bundles not read (at most %d are)", maxBundles))
	}
	return "", none, failures, nil
}
