package controller

import "sigs.k8s.io/controller-runtime/pkg/cache"

// managedCache runs a cache among the manager's caches: started before the controllers, and
// waited for until synced.
type managedCache struct{ cache.Cache }

func (c managedCache) GetCache() cache.Cache { return c.Cache }
