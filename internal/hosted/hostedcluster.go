package hosted

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HostedClusterGVK is HyperShift's HostedCluster API, the only version it serves.
var HostedClusterGVK = schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "HostedCluster"}

// HostedCluster is what pkgsync needs to know of the HostedCluster behind a namespace.
type HostedCluster struct {
	Name, Namespace string
	// ControlPlaneNamespace is the hosted-control-plane namespace.
	ControlPlaneNamespace string
	// Available mirrors the Available condition; Message explains it when false.
	Available bool
	Message   string
	// Paused is true while HyperShift reports its reconciliation paused
	// (ReconciliationActive=False): the API server runs, but secrets and certificates are not
	// refreshed. PausedUntil is spec.pausedUntil as written, which pauses it too: see PausedAt.
	Paused      bool
	PausedUntil string
	// Labels, Annotations and NodeSelector (spec.nodeSelector) are what package templates see
	// of it; copies, never the cache's maps.
	Labels, Annotations, NodeSelector map[string]string
	// PlatformType is spec.platform.type (AWS, Azure, KubeVirt, None, ...).
	PlatformType string
	// Endpoint is the hosted API server HyperShift advertises, status.controlPlaneEndpoint as
	// host:port; empty until it is known.
	Endpoint string
	// ImageContentSources is spec.imageContentSources: the mirrors of its sources, which
	// HyperShift makes digest mirrors of (ImageDigestMirrorSets in the hosted cluster).
	ImageContentSources []ImageContentSource
}

// ImageContentSource is one entry of a HostedCluster's spec.imageContentSources.
type ImageContentSource struct {
	Source  string
	Mirrors []string
}

// PausedAt tells whether the cluster's owner has paused it at now, as HyperShift reads it:
// ReconciliationActive=False, or spec.pausedUntil a boolean that is true (as Go's
// strconv.ParseBool reads it: "true", "True", "1", ...) or an RFC 3339 time after now (a past
// or unparsable time pauses nothing). HyperShift's operator writes the condition some time after
// the field changes, and not at all while it is down; the field is the owner's word. until is
// the time the pause ends by itself, zero when it does not.
func (hc *HostedCluster) PausedAt(now time.Time) (paused bool, until time.Time) {
	if b, err := strconv.ParseBool(hc.PausedUntil); err == nil {
		return b || hc.Paused, time.Time{}
	}
	if t, err := time.Parse(time.RFC3339, hc.PausedUntil); err == nil && t.After(now) {
		if hc.Paused {
			return true, time.Time{} // the condition may outlast the time
		}
		return true, t
	}
	return hc.Paused, time.Time{}
}

// ControlPlaneNamespace returns the hosted-control-plane namespace HyperShift uses for a
// HostedCluster: <namespace>-<name with dots replaced by dashes>.
func ControlPlaneNamespace(namespace, name string) string {
	return namespace + "-" + strings.ReplaceAll(name, ".", "-")
}

// FindHostedCluster returns the HostedCluster whose control plane lives in namespace, nil when
// there is none or the HostedCluster API is not installed (then pkgsync works from the connector
// Secret alone).
//
// HyperShift's namespace name is not one to one: a-x/b, a/x-b and a/x.b all map to a-x-b. When
// more than one HostedCluster maps to namespace, the HostedControlPlane there decides, as it
// names its HostedCluster (OwnerOfNamespace, read through controlPlanes); when it names none of
// them, the result is an *AmbiguousError, never one picked at random.
//
// With indexed set, reader must be a cache that IndexHostedClusters indexed: the lookup is then
// one index hit without copies, instead of a scan of every HostedCluster.
func FindHostedCluster(ctx context.Context, reader, controlPlanes client.Reader, namespace string, indexed bool) (*HostedCluster, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(HostedClusterGVK.GroupVersion().WithKind(HostedClusterGVK.Kind + "List"))
	var opts []client.ListOption
	if indexed {
		// Read-only use below: the cache's objects are not copied.
		opts = append(opts, client.MatchingFields{controlPlaneNamespaceField: namespace}, client.UnsafeDisableDeepCopy)
	}
	if err := reader.List(ctx, list, opts...); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list HostedClusters: %w", err)
	}
	var found []*unstructured.Unstructured
	for i := range list.Items {
		if hc := &list.Items[i]; ControlPlaneNamespace(hc.GetNamespace(), hc.GetName()) == namespace {
			found = append(found, hc)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return hostedClusterOf(found[0], namespace), nil
	}
	keys := make([]types.NamespacedName, len(found))
	for i, hc := range found {
		keys[i] = types.NamespacedName{Namespace: hc.GetNamespace(), Name: hc.GetName()}
	}
	owner, err := OwnerOfNamespace(ctx, controlPlanes, namespace, keys)
	if err != nil {
		return nil, err
	}
	return hostedClusterOf(found[slices.Index(keys, owner)], namespace), nil
}

// HostedClusterOf reads what pkgsync needs of a HostedCluster object (one from a list: its
// hosted-control-plane namespace is the one its name maps to).
func HostedClusterOf(hc *unstructured.Unstructured) *HostedCluster {
	return hostedClusterOf(hc, ControlPlaneNamespace(hc.GetNamespace(), hc.GetName()))
}

func hostedClusterOf(hc *unstructured.Unstructured, namespace string) *HostedCluster {
	out := &HostedCluster{Name: hc.GetName(), Namespace: hc.GetNamespace(), ControlPlaneNamespace: namespace, Message: "no Available condition yet",
		Labels: maps.Clone(hc.GetLabels()), Annotations: maps.Clone(hc.GetAnnotations())}
	// NestedStringMap copies; a malformed nodeSelector leaves it empty (HyperShift's own
	// validation rejects one).
	out.NodeSelector, _, _ = unstructured.NestedStringMap(hc.Object, "spec", "nodeSelector")
	out.PlatformType, _, _ = unstructured.NestedString(hc.Object, "spec", "platform", "type")
	out.PausedUntil, _, _ = unstructured.NestedString(hc.Object, "spec", "pausedUntil")
	out.Endpoint = endpointOf(hc)
	out.ImageContentSources = imageContentSourcesOf(hc)
	conds, _, _ := unstructured.NestedSlice(hc.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		status, _ := cm["status"].(string)
		message, _ := cm["message"].(string)
		switch cm["type"] {
		case "Available":
			out.Available = status == "True"
			out.Message = message
		case "ReconciliationActive":
			out.Paused = status == "False"
		}
	}
	return out
}

// imageContentSourcesOf reads spec.imageContentSources (copies); a malformed entry is skipped
// (HyperShift's schema refuses one).
func imageContentSourcesOf(hc *unstructured.Unstructured) []ImageContentSource {
	entries, _, _ := unstructured.NestedSlice(hc.Object, "spec", "imageContentSources")
	var out []ImageContentSource
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		src, _, _ := unstructured.NestedString(m, "source")
		mirrors, _, _ := unstructured.NestedStringSlice(m, "mirrors")
		out = append(out, ImageContentSource{Source: src, Mirrors: mirrors})
	}
	return out
}

// endpointOf returns status.controlPlaneEndpoint as host:port, empty when not (yet) set.
func endpointOf(hc *unstructured.Unstructured) string {
	host, _, _ := unstructured.NestedString(hc.Object, "status", "controlPlaneEndpoint", "host")
	if host == "" {
		return ""
	}
	port, ok, _ := unstructured.NestedInt64(hc.Object, "status", "controlPlaneEndpoint", "port")
	if !ok || port <= 0 || port > 65535 {
		return ""
	}
	return net.JoinHostPort(host, strconv.FormatInt(port, 10))
}

// HostedControlPlaneGVK is HyperShift's HostedControlPlane API: one in every
// hosted-control-plane namespace, naming its HostedCluster in ClusterAnnotation.
var HostedControlPlaneGVK = schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "HostedControlPlane"}

// ClusterAnnotation is the annotation on a HostedControlPlane that names its HostedCluster,
// <namespace>/<name>.
const ClusterAnnotation = "hypershift.openshift.io/cluster"

// AmbiguousError says that several HostedClusters map to one hosted-control-plane namespace and
// no HostedControlPlane there names one of them.
type AmbiguousError struct {
	Namespace string
	// HostedClusters are the candidates, sorted.
	HostedClusters []types.NamespacedName
	// Why says what the HostedControlPlanes of the namespace said.
	Why string
}

func (e *AmbiguousError) Error() string {
	names := make([]string, len(e.HostedClusters))
	for i, k := range e.HostedClusters {
		names[i] = k.String()
	}
	return fmt.Sprintf("HostedClusters %s all map to namespace %s (<namespace>-<name>, dots as dashes), and %s; delete or rename all but one of them",
		strings.Join(names, ", "), e.Namespace, e.Why)
}

// OwnerOfNamespace returns which of several HostedClusters that map to namespace owns it: the
// one its HostedControlPlane names in ClusterAnnotation, as HyperShift wrote it. Only the
// HostedControlPlanes' metadata is listed. It is meant for the rare namespace that more than one
// HostedCluster maps to, so reader is typically uncached: a cache (an informer on every
// HostedControlPlane) would cost memory for every hosted cluster to settle what only colliding
// names need. Without a HostedControlPlane naming exactly one of candidates, it returns an
// *AmbiguousError.
func OwnerOfNamespace(ctx context.Context, reader client.Reader, namespace string, candidates []types.NamespacedName) (types.NamespacedName, error) {
	sorted := slices.Clone(candidates)
	slices.SortFunc(sorted, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	ambiguous := func(why string) error {
		return &AmbiguousError{Namespace: namespace, HostedClusters: sorted, Why: why}
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(HostedControlPlaneGVK.GroupVersion().WithKind(HostedControlPlaneGVK.Kind + "List"))
	if err := reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return types.NamespacedName{}, ambiguous("the HostedControlPlane API is not installed to tell which one it belongs to")
		}
		return types.NamespacedName{}, fmt.Errorf("list HostedControlPlanes in %s: %w", namespace, err)
	}
	var named []types.NamespacedName
	for _, hcp := range list.Items {
		ns, name, ok := strings.Cut(hcp.GetAnnotations()[ClusterAnnotation], "/")
		if key := (types.NamespacedName{Namespace: ns, Name: name}); ok && slices.Contains(sorted, key) && !slices.Contains(named, key) {
			named = append(named, key)
		}
	}
	switch {
	case len(named) == 1:
		return named[0], nil
	case len(list.Items) == 0:
		return types.NamespacedName{}, ambiguous("no HostedControlPlane there tells which one it belongs to")
	case len(named) == 0:
		return types.NamespacedName{}, ambiguous(fmt.Sprintf("no HostedControlPlane there names one of them in annotation %s", ClusterAnnotation))
	}
	return types.NamespacedName{}, ambiguous("HostedControlPlanes there name more than one of them")
}

// TrimHostedCluster is a cache transform: it keeps of a HostedCluster only what pkgsync reads
// (metadata, spec.nodeSelector, spec.platform.type, spec.pausedUntil, spec.imageContentSources,
// status.conditions and status.controlPlaneEndpoint, which FindHostedCluster, the fleet and the
// watch predicate use)
// and passes every other object through. A real HostedCluster carries tens of kilobytes of spec
// and status (networking, platform details, version history); a controller of a thousand hosted
// clusters would hold them all.
func TrimHostedCluster(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind() != HostedClusterGVK {
		return obj, nil
	}
	trimmed := map[string]any{"apiVersion": u.Object["apiVersion"], "kind": u.Object["kind"], "metadata": u.Object["metadata"]}
	spec := map[string]any{}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "nodeSelector"); ok {
		spec["nodeSelector"] = v
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "platform", "type"); ok {
		spec["platform"] = map[string]any{"type": v}
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "pausedUntil"); ok {
		spec["pausedUntil"] = v
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "imageContentSources"); ok {
		spec["imageContentSources"] = v
	}
	trimmed["spec"] = spec
	status := map[string]any{}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions"); ok {
		status["conditions"] = v
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "controlPlaneEndpoint"); ok {
		status["controlPlaneEndpoint"] = v
	}
	if len(status) > 0 {
		trimmed["status"] = status
	}
	u.Object = trimmed
	return u, nil
}

// controlPlaneNamespaceField indexes HostedClusters by their hosted-control-plane namespace.
const controlPlaneNamespaceField = "hypershift.controlPlaneNamespace"

// IndexHostedClusters registers the cache index FindHostedCluster uses with indexed set. It
// fails when the HostedCluster API is not installed.
func IndexHostedClusters(ctx context.Context, indexer client.FieldIndexer) error {
	hc := &unstructured.Unstructured{}
	hc.SetGroupVersionKind(HostedClusterGVK)
	return indexer.IndexField(ctx, hc, controlPlaneNamespaceField, func(o client.Object) []string {
		return []string{ControlPlaneNamespace(o.GetNamespace(), o.GetName())}
	})
}
