package source

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/lru"
	"oras.land/oras-go/v2/registry/remote/auth"
)

const (
	// accessEntries bounds the number of access proofs remembered.
	accessEntries = 4096
	// defaultAccessTTL is how long a proof is trusted when Options.AccessTTL is zero.
	defaultAccessTTL = 5 * time.Minute
	// sharedAccessTimeout bounds an access check that merged callers share: it runs on after
	// the caller that started it gives up, so that the others still get their answer, and
	// stops once none waits.
	sharedAccessTimeout = time.Minute
)

// accessCache remembers which credential the registry let read which manifest digest in which
// repository, and since when. The caches serve content by digest without asking the registry,
// so a caller gets cached content only once the registry has said, recently, that the caller's
// own credential may read that digest in that repository.
type accessCache struct {
	ttl     time.Duration
	entries *lru.Cache // of time.Time, when the proving request was sent, keyed by accessKey
	flight  flightGroup
	now     func() time.Time
}

func newAccessCache(ttl time.Duration) *accessCache {
	if ttl == 0 {
		ttl = defaultAccessTTL
	}
	return &accessCache{ttl: ttl, entries: lru.New(accessEntries), now: time.Now}
}

// accessKey identifies the repository and manifest digest ref names, and the credential, without
// keeping the secret itself.
func accessKey(ref Reference, cred auth.Credential) string {
	return ref.Content() + "\x00" + credentialKey(ref.Registry, cred)
}

// record notes that the registry let cred read ref.Digest in ref's repository, answering a
// request sent at sent.
func (a *accessCache) record(ref Reference, cred auth.Credential, sent time.Time) {
	if a.ttl < 0 {
		return
	}
	a.entries.Add(accessKey(ref, cred), sent)
}

// proven tells whether a proof for key is younger than the TTL.
func (a *accessCache) proven(key string) bool {
	if a.ttl < 0 {
		return false
	}
	v, ok := a.entries.Get(key)
	return ok && a.now().Sub(v.(time.Time)) < a.ttl
}

// Authorize proves that creds may read the manifest ref.Digest names in ref's repository (at
// one of its locations, with the credential creds holds for that location's host), as
// Pull does before it serves anything cached: by a recent proof (a tag resolution or an earlier
// check with the same credential), or by one HEAD request. The caller's own mirrors (a view's,
// WithCallerMirrors) are not asked: they prove access only to what is read from them. Callers
// that keep what they made of a pulled package (a render) call it before using that again, so
// that revoked access ends there too.
func (c *Client) Authorize(ctx context.Context, ref Reference, creds Credentials) error {
	if ref.Digest == "" {
		return fmt.Errorf("authorize %s: the reference names no digest", ref)
	}
	// Not at the caller's own mirrors (callerOnly): what the caller keeps is kept under ref's
	// name, and such a mirror proves access only to what is read from it.
	if _, _, err := c.withoutCallerMirrors().authorizeChain(ctx, ref, creds); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	return nil
}

// authorize proves that cred may read the manifest ref.Digest in ref's repository: by a recent
// proof, or by one HEAD request for the manifest with cred. Concurrent checks of one key share
// the request. Refusals are not remembered.
func (c *Client) authorize(ctx context.Context, ref Reference, cred auth.Credential) error {
	key := accessKey(ref, cred)
	ac := c.access
	if ac.proven(key) {
		return nil
	}
	// The first caller's context values do the request; its cancellation does not, so the
	// callers merged into it are not failed by it. They share one credential: the key says so.
	_, err := ac.flight.do(ctx, key, sharedAccessTimeout, func(ctx context.Context) (any, error) {
		sent := ac.now()
		if _, err := c.repositoryWith(ref, cred).Resolve(ctx, ref.Digest); err != nil {
			return nil, c.explain(ref, err)
		}
		ac.record(ref, cred, sent)
		return nil, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return err
	}
	return fmt.Errorf("check access: %w", err)
}
