package source

import (
	"context"
	"sync"

	"k8s.io/utils/lru"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
)

const (
	// tokenCacheBytes bounds the registry tokens kept, for every credential together.
	tokenCacheBytes = 8 << 20
	// tokenEntryOverhead approximates what one kept token costs besides its key and itself.
	tokenEntryOverhead = 128
)

// tokenStore keeps the auth schemes and tokens registries answered, for every credential, in
// bytes bounded. It stands for oras' auth.NewCache, which keeps every token it is given, one per
// registry and set of scopes, for the life of the cache: the scopes are the registry's to name
// (a challenge's scope parameter is added to the key), and a token is up to 128 KiB (oras'
// bound on a token response), so a registry naming a new scope on every request grew it by a
// token each reconcile, without end. Tokens are fetched again when evicted.
type tokenStore struct {
	mu      sync.Mutex
	schemes *lru.Cache // of auth.Scheme, keyed by credential and registry
	tokens  *lru.Cache // of string, keyed by credential, registry, scheme and scopes
	bytes   int64
	max     int64
}

func newTokenStore(max int64) *tokenStore {
	s := &tokenStore{schemes: lru.New(authCacheEntries), max: max}
	// Called by the lru under s.mu: every call that can evict is made holding it.
	s.tokens = lru.NewWithEvictionFunc(0, func(key lru.Key, value any) {
		s.bytes -= tokenSize(key.(string), value.(string))
	})
	return s
}

func tokenSize(key, token string) int64 {
	return int64(len(key)+len(token)) + tokenEntryOverhead
}

// forCredential returns the auth.Cache of one credential (credentialKey): what it holds is never
// sent on behalf of another.
func (s *tokenStore) forCredential(cred string) auth.Cache {
	return credentialTokens{store: s, cred: cred}
}

// credentialTokens is the auth.Cache of one credential in a tokenStore.
type credentialTokens struct {
	store *tokenStore
	cred  string
}

func (c credentialTokens) GetScheme(_ context.Context, registry string) (auth.Scheme, error) {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.schemes.Get(c.cred + "\x00" + registry)
	if !ok {
		return auth.SchemeUnknown, errdef.ErrNotFound
	}
	return v.(auth.Scheme), nil
}

func (c credentialTokens) GetToken(_ context.Context, registry string, scheme auth.Scheme, key string) (string, error) {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.schemes.Get(c.cred + "\x00" + registry); !ok || v.(auth.Scheme) != scheme {
		return "", errdef.ErrNotFound
	}
	v, ok := s.tokens.Get(c.tokenKey(registry, scheme, key))
	if !ok {
		return "", errdef.ErrNotFound
	}
	return v.(string), nil
}

// Set fetches a token and keeps it. Unlike oras' cache, concurrent fetches of one key are not
// merged: each caller fetches with its own context.
func (c credentialTokens) Set(ctx context.Context, registry string, scheme auth.Scheme, key string, fetch func(context.Context) (string, error)) (string, error) {
	token, err := fetch(ctx)
	if err != nil {
		return "", err
	}
	s := c.store
	k := c.tokenKey(registry, scheme, key)
	size := tokenSize(k, token)
	s.mu.Lock()
	defer s.mu.Unlock()
	// A registry's scheme is assumed not to change; when it does, its tokens of the old one
	// are not found (GetToken checks the scheme) and age out.
	s.schemes.Add(c.cred+"\x00"+registry, scheme)
	// The lru replaces a value without evicting it: remove it first, so that it is uncounted.
	s.tokens.Remove(k)
	if size > s.max {
		return token, nil
	}
	s.tokens.Add(k, token)
	s.bytes += size
	for s.bytes > s.max && s.tokens.Len() > 0 {
		s.tokens.RemoveOldest()
	}
	return token, nil
}

func (c credentialTokens) tokenKey(registry string, scheme auth.Scheme, key string) string {
	return c.cred + "\x00" + registry + "\x00" + scheme.String() + "\x00" + key
}
