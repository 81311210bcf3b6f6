package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/utils/lru"

	"pkgsync.dev/pkgsync/render"
)

// renderCache keeps rendered packages by everything that goes into a render, so an unchanged
// package is neither pulled nor rendered again on each interval. Results are shared: callers
// must not modify them (the apply engine copies objects before it changes them).
type renderCache struct {
	cache *lru.Cache
}

func newRenderCache(size int) *renderCache { return &renderCache{cache: lru.New(size)} }

func (c *renderCache) get(key string) (*render.Result, bool) {
	v, ok := c.cache.Get(key)
	if !ok {
		return nil, false
	}
	return v.(*render.Result), true
}

func (c *renderCache) put(key string, r *render.Result) { c.cache.Add(key, r) }

// renderKey fingerprints the inputs of a render.
func renderKey(digest, configDigest string, opts render.Options) string {
	opts.Config = nil // represented by configDigest
	// Templates see no labels and empty labels alike (render turns both into an empty map), so
	// the key must too: a Package whose only annotation is the reconcile request has an empty
	// map after userAnnotations, and must not render again for it.
	if len(opts.Labels) == 0 {
		opts.Labels = nil
	}
	if len(opts.Annotations) == 0 {
		opts.Annotations = nil
	}
	data, _ := json.Marshal(opts)
	h := sha256.New()
	h.Write([]byte(digest))
	h.Write([]byte{0})
	h.Write([]byte(configDigest))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
