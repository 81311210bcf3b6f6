package setup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/internal/hosted"
)

// hostedClusterEvents wakes the resources of a HostedCluster's hosted-control-plane namespace:
// every one of them when what pkgsync gates on changes (the HostedCluster appears or goes,
// becomes Available or not, is paused or resumed by its condition or spec.pausedUntil, advertises another API server endpoint, changes
// spec.imageContentSources), and, when only what templates see of it
// changes (labels, annotations, spec.nodeSelector, spec.platform.type), those whose last render
// read it or that have no render yet. HyperShift writes status often; the rest wakes nobody.
type hostedClusterEvents struct {
	inNamespace func(context.Context, string) []reconcile.Request
	// readsHostedCluster tells whether the last render of a resource read its HostedCluster,
	// true when it has none. Nil for kinds that render no templates.
	readsHostedCluster func(namespace, name string) bool
	// available is told the namespace of a HostedCluster that HyperShift reports Available.
	available func(namespace string)
}

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (h hostedClusterEvents) Create(ctx context.Context, e event.CreateEvent, q requestQueue) {
	h.all(ctx, e.Object, q)
}

func (h hostedClusterEvents) Delete(ctx context.Context, e event.DeleteEvent, q requestQueue) {
	h.all(ctx, e.Object, q)
}

func (h hostedClusterEvents) Generic(ctx context.Context, e event.GenericEvent, q requestQueue) {
	h.all(ctx, e.Object, q)
}

func (h hostedClusterEvents) Update(ctx context.Context, e event.UpdateEvent, q requestQueue) {
	switch {
	case HostedClusterState(e.ObjectOld) != HostedClusterState(e.ObjectNew):
		h.all(ctx, e.ObjectNew, q)
	case endpoint(e.ObjectOld) != endpoint(e.ObjectNew):
		// The advertised endpoint decides which server a connector kubeconfig may name: a change
		// wakes the namespace, without closing its circuit as Available=True does.
		h.enqueue(ctx, e.ObjectNew, q, nil)
	case imageContentSources(e.ObjectOld) != imageContentSources(e.ObjectNew):
		// Where the namespace's packages are read from (mirrors.OfHostedCluster): every resource there
		// reads again, through the new mirrors.
		h.enqueue(ctx, e.ObjectNew, q, nil)
	case h.readsHostedCluster != nil && templateView(e.ObjectOld) != templateView(e.ObjectNew):
		h.enqueue(ctx, e.ObjectNew, q, h.readsHostedCluster)
	}
}

// all wakes every resource of o's namespace, telling available first when o is Available.
func (h hostedClusterEvents) all(ctx context.Context, o client.Object, q requestQueue) {
	if h.available != nil && strings.Contains(HostedClusterState(o), "Available=True;") {
		h.available(controlPlaneNamespaceOf(o))
	}
	h.enqueue(ctx, o, q, nil)
}

// enqueue wakes the resources of o's namespace that wanted accepts (every one when nil).
func (h hostedClusterEvents) enqueue(ctx context.Context, o client.Object, q requestQueue, wanted func(namespace, name string) bool) {
	for _, req := range h.inNamespace(ctx, controlPlaneNamespaceOf(o)) {
		if wanted == nil || wanted(req.Namespace, req.Name) {
			q.Add(req)
		}
	}
}

func controlPlaneNamespaceOf(o client.Object) string {
	return hosted.ControlPlaneNamespace(o.GetNamespace(), o.GetName())
}

// HostedClusterState is what pkgsync gates on: the Available and ReconciliationActive
// conditions, and spec.pausedUntil.
func HostedClusterState(o client.Object) string {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	state := ""
	if until, ok, _ := unstructured.NestedString(u.Object, "spec", "pausedUntil"); ok {
		state = "pausedUntil=" + until + ";"
	}
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && (m["type"] == "Available" || m["type"] == "ReconciliationActive") {
			state += fmt.Sprintf("%v=%v;", m["type"], m["status"])
		}
	}
	return state
}

// endpoint is the HostedCluster's status.controlPlaneEndpoint, as one comparable string.
func endpoint(o client.Object) string {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	ep, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "controlPlaneEndpoint")
	return fmt.Sprint(ep)
}

// imageContentSources is the HostedCluster's spec.imageContentSources, as one comparable
// string.
func imageContentSources(o client.Object) string {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	ics, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "imageContentSources")
	return fmt.Sprint(ics)
}

// templateView is what package templates see of a HostedCluster (templateHostedCluster), as
// one comparable string.
func templateView(o client.Object) string {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	nodeSelector, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "nodeSelector")
	platform, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "platform", "type")
	// Maps marshal with sorted keys: equal views give equal strings.
	data, err := json.Marshal([]any{u.GetLabels(), u.GetAnnotations(), nodeSelector, platform})
	if err != nil {
		return "" // unreachable for decoded JSON; an empty view only wakes less
	}
	return string(data)
}
