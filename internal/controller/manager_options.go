package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkgsync.dev/pkgsync/api/v1alpha1"
	"pkgsync.dev/pkgsync/internal/hosted"
)

// CacheOptions is the cache layout Setup relies on: Secrets are cached only under the
// connector Secret's name, and only their metadata (least privilege: no Secret's data is held
// in a cache; hosted.Clients reads a connector Secret's data from the API server when its
// metadata shows a Secret its client was not built from; the configFrom watch keeps a separate
// metadata-only cache of ConfigMaps and Secrets, and their data are read from the API server
// when a reconcile needs them), and with a non-nil selector only the pkgsync resources it matches are reconciled
// (sharding, as Flux does). Cached objects are kept without managedFields: pkgsync reads the
// field owners of the objects it applies from the API server (uncached), never from the cache,
// and on a large object such as a HostedCluster they are a good part of its size. HostedClusters
// keep only what pkgsync reads of them (hosted.TrimHostedCluster); pkgsync never writes them.
// Nothing else is stripped: member Packages are written back whole (Update), annotations included.
func CacheOptions(connectorSecret string, selector labels.Selector) cache.Options {
	byObject := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", connectorSecret), Transform: keepSecretIdentity},
	}
	if selector != nil {
		for _, obj := range []client.Object{&v1alpha1.Package{}, &v1alpha1.ClusterPackage{}, &v1alpha1.ObjectDeployment{}, &v1alpha1.ClusterObjectDeployment{}, &v1alpha1.HostedClusterPackage{}} {
			byObject[obj] = cache.ByObject{Label: selector}
		}
	}
	stripManagedFields := cache.TransformStripManagedFields()
	return cache.Options{ByObject: byObject, DefaultTransform: func(obj any) (any, error) {
		obj, err := stripManagedFields(obj)
		if err != nil {
			return nil, err
		}
		return hosted.TrimHostedCluster(obj)
	}}
}

// ClientOptions is the manager client Setup relies on. HostedClusters are read as unstructured
// objects (pkgsync does not import HyperShift's API), so unstructured reads are cached: Setup
// indexes HostedClusters in that cache. Namespaces are read directly, only on deletion.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true, DisableFor: []client.Object{&corev1.Namespace{}}}}
}

// ShardLabelKeys are the label keys a --watch-label-selector reads, sorted and without
// repeats ("!key" and "key=a" both read key). A fleet copies its values of them to its
// members (nil selector: none).
func ShardLabelKeys(selector labels.Selector) []string {
	if selector == nil {
		return nil
	}
	reqs, _ := selector.Requirements()
	var keys []string
	for _, r := range reqs {
		keys = append(keys, r.Key())
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// LeaderElectionID is the lease a shard elects its leader with: base when the controller is
// not sharded, else base with a digest of the selector appended, so that shards with
// different selectors never wait for each other's lease, and the replicas of one shard share
// one. An explicit --leader-election-id is used as it is.
func LeaderElectionID(base string, selector labels.Selector) string {
	if selector == nil || selector.Empty() {
		return base
	}
	sum := sha256.Sum256([]byte(selector.String()))
	return base + "-" + hex.EncodeToString(sum[:])[:10]
}

// keepSecretIdentity keeps of a connector Secret's metadata what hosted.Clients reads (its
// resourceVersion, to tell a Secret it has not read; its creation time, for a departed
// client) and the watch maps (namespace and name): a HyperShift connector Secret's labels,
// annotations and owner references, held for every hosted cluster, are read by nobody.
func keepSecretIdentity(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return cache.TransformStripManagedFields()(obj) // a typed informer, which nothing starts
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}}, nil
}
