package packages

import (
	"context"

	"pkgsync.dev/pkgsync/internal/applier"
)

// config reads spec.configFrom (applier.ReadConfig) in the resource's namespace, or the controller's
// for a ClusterPackage, as the identity the resource applies with: the ServiceAccount it
// impersonates (spec.serviceAccountName, or --default-service-account for a Package), which
// must be allowed to get the ConfigMaps and Secrets it names, else the controller. The reads go
// to the API server, not a cache: the controller holds no Secret's data in memory.
func (r *packageSteps[T]) config(ctx context.Context, obj T) (*applier.ConfigInput, error) {
	spec := obj.GetSpec()
	namespace := obj.GetNamespace()
	if namespace == "" {
		namespace = r.options.Namespace
	}
	var reader applier.ConfigSourceReader = r.apiReader
	if len(spec.ConfigFrom) > 0 {
		var err error
		if reader, err = r.applier.ConfigReader(applier.OwnerOf(obj, r.kind), spec.ServiceAccountName, r.apiReader); err != nil {
			return nil, err
		}
	}
	return applier.ReadConfig(ctx, reader, namespace, spec)
}
