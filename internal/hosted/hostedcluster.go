package hosted

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// Paused is true while HyperShift's reconciliation is paused (ReconciliationActive=False):
	// the API server runs, but secrets and certificates are not refreshed.
	Paused bool
	// Labels, Annotations and NodeSelector (spec.nodeSelector) are what package templates see
	// of it; copies, never the cache's maps.
	Labels, Annotations, NodeSelector map[string]string
	// PlatformType is spec.platform.type (AWS, Azure, KubeVirt, None, ...).
	PlatformType string
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
// With indexed set, reader must be a cache that IndexHostedClusters indexed: the lookup is then
// one index hit without copies, instead of a scan of every HostedCluster.
func FindHostedCluster(ctx context.Context, reader client.Reader, namespace string, indexed bool) (*HostedCluster, error) {
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
	for i := range list.Items {
		hc := &list.Items[i]
		if ControlPlaneNamespace(hc.GetNamespace(), hc.GetName()) != namespace {
			continue
		}
		out := &HostedCluster{Name: hc.GetName(), Namespace: hc.GetNamespace(), ControlPlaneNamespace: namespace, Message: "no Available condition yet",
			Labels: maps.Clone(hc.GetLabels()), Annotations: maps.Clone(hc.GetAnnotations())}
		// NestedStringMap copies; a malformed nodeSelector leaves it empty (HyperShift's own
		// validation rejects one).
		out.NodeSelector, _, _ = unstructured.NestedStringMap(hc.Object, "spec", "nodeSelector")
		out.PlatformType, _, _ = unstructured.NestedString(hc.Object, "spec", "platform", "type")
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
		return out, nil
	}
	return nil, nil
}

// TrimHostedCluster is a cache transform: it keeps of a HostedCluster only what pkgsync reads
// (metadata, spec.nodeSelector, spec.platform.type, status.conditions, which FindHostedCluster,
// the fleet and the watch predicate use) and passes every other object through. A real
// HostedCluster carries tens of kilobytes of spec and status (networking, platform details,
// version history); a controller of a thousand hosted clusters would hold them all.
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
	trimmed["spec"] = spec
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions"); ok {
		trimmed["status"] = map[string]any{"conditions": v}
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
