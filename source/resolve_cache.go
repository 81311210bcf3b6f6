package source

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/lru"
)

// resolutionEntries bounds the number of tag resolutions remembered.
const resolutionEntries = 4096

// sharedResolveTimeout bounds a resolution that merged callers share: it runs on after the
// caller that started it gives up, so that the others still get their answer, and stops once
// none waits.
const sharedResolveTimeout = time.Minute

// resolutionCache remembers when each tag was last resolved to which digest, per credential,
// and merges concurrent resolutions of one tag. A fleet of resources naming one tag then costs
// one HEAD request per interval instead of one per resource.
type resolutionCache struct {
	entries *lru.Cache // of resolution, keyed by resolutionKey
	flight  flightGroup
	now     func() time.Time
}

type resolution struct {
	digest string
	at     time.Time
}

func newResolutionCache() *resolutionCache {
	return &resolutionCache{entries: lru.New(resolutionEntries), now: time.Now}
}

// ResolveWithin returns the manifest digest ref names, like Resolve, but reuses a resolution of
// the same tag with the same credentials that is younger than maxAge; zero maxAge always asks
// the registry. Concurrent calls for one tag and credential share one HEAD request, whatever
// their maxAge: a resolution in flight is newer than any the caller could have had. Failures
// are not remembered.
//
// Controllers pass their reconcile interval (or a fraction of it) as maxAge, so that any number
// of resources naming one tag cost one registry request per interval.
func (c *Client) ResolveWithin(ctx context.Context, ref Reference, creds Credentials, maxAge time.Duration) (string, error) {
	if ref.Digest != "" || ref.Tag == "" {
		return c.Resolve(ctx, ref, creds)
	}
	// The tag and the credentials, not only the tag: a caller must not learn from the cache
	// what the registry would refuse to tell it. The credential of every location the tag is
	// resolved at, not only the source's (chainKey).
	chain, err := c.chainKey(ctx, ref, byTag, creds)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, err)
	}
	key := ref.Name() + ":" + ref.Tag + "\x00" + chain
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, err)
	}
	rc := c.resolutions
	if maxAge > 0 {
		if v, ok := rc.entries.Get(key); ok {
			if r := v.(resolution); rc.now().Sub(r.at) < maxAge {
				return r.digest, nil
			}
		}
	}

	// The first caller's context values do the request; its cancellation does not, so the
	// callers merged into it are not failed by it.
	val, err := rc.flight.do(ctx, key, sharedResolveTimeout, func(ctx context.Context) (any, error) {
		started := rc.now()
		dgst, _, err := c.resolveChain(ctx, ref, creds)
		if err != nil {
			return "", err
		}
		// Aged from when the request was sent: the registry answered no earlier than that. One
		// flight per key at a time, so no older answer can overwrite this one.
		rc.entries.Add(key, resolution{digest: dgst, at: started})
		return dgst, nil
	})
	switch {
	case err == nil:
		return val.(string), nil
	case ctx.Err() != nil:
		return "", fmt.Errorf("resolve %s: %w", ref, err)
	}
	return "", err
}
