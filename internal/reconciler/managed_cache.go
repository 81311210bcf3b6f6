package reconciler

import "sigs.k8s.io/controller-runtime/pkg/cache"

// ManagedCache runs a cache among the manager's caches: started before the controllers, and
// waited for until synced.
type ManagedCache struct{ cache.Cache }

func (c ManagedCache) GetCache() cache.Cache { return c.Cache }
