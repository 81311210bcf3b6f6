package packages

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/setup"
)

// configSourceIndex indexes Packages and ClusterPackages by the ConfigMaps and Secrets their
// spec.configFrom names (KIND/NAME; the namespace is the resource's own, or the controller's for
// ClusterPackages), so that a change of one finds the resources that read it.
const configSourceIndex = "pkgsync.dev/configFrom"

// indexConfigFrom is the configSourceIndex function of Packages and ClusterPackages.
func indexConfigFrom(o client.Object) []string {
	p, ok := o.(packageObject)
	if !ok {
		return nil
	}
	var ids []string
	for _, src := range p.GetSpec().ConfigFrom {
		ids = append(ids, src.Kind+"/"+src.Name)
	}
	return ids
}

// configSourceCache watches the metadata of ConfigMaps and Secrets, for spec.configFrom: a cache
// of its own, apart from the manager's, which holds Secrets only under the connector Secret's
// name (CacheOptions). It holds no data: each object is kept as its namespace, name, uid and
// resourceVersion (keepIdentity drops labels, annotations, which may hold a copy of the data in
// kubectl's last-applied-configuration, and managed fields), some 200 bytes per object. The data
// are read from the API server when a resource that names the object reconciles.
func configSourceCache(s *setup.Services) (cache.Cache, error) {
	c, err := cache.New(s.Manager.GetConfig(), cache.Options{Scheme: s.Manager.GetScheme(), Mapper: s.Manager.GetRESTMapper(),
		DefaultTransform: keepIdentity})
	if err != nil {
		return nil, fmt.Errorf("create ConfigMap and Secret metadata cache: %w", err)
	}
	if err := s.Manager.Add(c); err != nil {
		return nil, fmt.Errorf("add ConfigMap and Secret metadata cache: %w", err)
	}
	return c, nil
}

// keepIdentity keeps of an object's metadata what telling it apart and telling a change needs.
func keepIdentity(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
	}}, nil
}

// indexConfigSources registers configSourceIndex on Packages and ClusterPackages.
func indexConfigSources(ctx context.Context, s *setup.Services) error {
	idx := s.Manager.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.Package{}, configSourceIndex, indexConfigFrom); err != nil {
		return err
	}
	return idx.IndexField(ctx, &v1alpha1.ClusterPackage{}, configSourceIndex, indexConfigFrom)
}

// watchConfigSources wakes the resources of a kind that name a ConfigMap or Secret in
// spec.configFrom when it is created, changed or deleted. inNamespace lists them: Packages in
// the object's namespace, ClusterPackages when the object is in the controller's.
func watchConfigSources(b *builder.Builder, sources cache.Cache, inNamespace func(ctx context.Context, namespace, id string) []reconcile.Request) *builder.Builder {
	for _, kind := range []string{"ConfigMap", "Secret"} {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		b = b.WatchesRawSource(crsource.Kind[client.Object](sources, obj,
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return inNamespace(ctx, o.GetNamespace(), kind+"/"+o.GetName())
			}), predicate.Funcs{GenericFunc: func(event.GenericEvent) bool { return false }}))
	}
	return b
}

// configSourceUsers lists the resources of a kind in a namespace (all namespaces: "") whose
// spec.configFrom names id (KIND/NAME).
func configSourceUsers(c client.Client, newList func() client.ObjectList) func(ctx context.Context, namespace, id string) []reconcile.Request {
	return func(ctx context.Context, namespace, id string) []reconcile.Request {
		opts := []client.ListOption{client.MatchingFields{configSourceIndex: id}}
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		return setup.RequestsFor(ctx, c, newList(), "a configFrom change of "+id+" in namespace "+namespace, opts...)
	}
}
