package setup

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"pkgsync.dev/pkgsync/test/testenv"
)

func TestHostedClusterEvents(t *testing.T) {
	t.Parallel()
	hc := func(edit func(map[string]any)) *unstructured.Unstructured {
		u := testenv.HostedCluster("clusters", "guest")
		u.SetLabels(map[string]string{"tier": "silver"})
		u.Object["status"] = map[string]any{"conditions": []any{
			testenv.Condition("Available", true, "The hosted control plane is available", 1),
			testenv.Condition("Degraded", false, "", 1),
		}}
		if edit != nil {
			edit(u.Object)
		}
		return u
	}
	inNamespace := func(_ context.Context, ns string) []reconcile.Request {
		return []reconcile.Request{
			{NamespacedName: types.NamespacedName{Namespace: ns, Name: "reader"}},
			{NamespacedName: types.NamespacedName{Namespace: ns, Name: "other"}},
		}
	}
	reads := func(_, name string) bool { return name == "reader" }
	for _, tt := range []struct {
		name string
		edit func(map[string]any)
		want []string
	}{
		{"relabelled: the reader", func(o map[string]any) { o["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "gold"} }, []string{"reader"}},
		{"platform changed: the reader", func(o map[string]any) { o["spec"].(map[string]any)["platform"] = map[string]any{"type": "AWS"} }, []string{"reader"}},
		{"no longer Available: everyone", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"].([]any)[0] = testenv.Condition("Available", false, "Waiting for hosted control plane to be healthy", 1)
		}, []string{"other", "reader"}},
		{"paused: everyone", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"] = append(o["status"].(map[string]any)["conditions"].([]any),
				testenv.Condition("ReconciliationActive", false, "Reconciliation paused until: true", 1))
		}, []string{"other", "reader"}},
		{"another endpoint advertised: everyone", func(o map[string]any) {
			o["status"].(map[string]any)["controlPlaneEndpoint"] = map[string]any{"host": "api.example.com", "port": int64(6443)}
		}, []string{"other", "reader"}},
		{"paused by spec.pausedUntil: everyone", func(o map[string]any) { o["spec"].(map[string]any)["pausedUntil"] = "true" }, []string{"other", "reader"}},
		{"imageContentSources changed: everyone", func(o map[string]any) {
			o["spec"].(map[string]any)["imageContentSources"] = []any{map[string]any{"source": "quay.io/team", "mirrors": []any{"mirror.example.com/team"}}}
		}, []string{"other", "reader"}},
		{"status churn: nobody", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"].([]any)[1] = testenv.Condition("Degraded", true, "etcd is slow", 2)
			o["status"].(map[string]any)["version"] = map[string]any{"desired": "4.21"}
		}, nil},
		{"spec the templates do not see: nobody", func(o map[string]any) {
			o["spec"].(map[string]any)["release"] = map[string]any{"image": "quay.io/openshift-release-dev/ocp-release:4.20.1-multi"}
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h := hostedClusterEvents{inNamespace: inNamespace, readsHostedCluster: reads}
			h.Update(t.Context(), event.UpdateEvent{ObjectOld: hc(nil), ObjectNew: hc(tt.edit)}, q)
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				assert.Equal(t, "clusters-guest", req.Namespace)
				got = append(got, req.Name)
				q.Done(req)
			}
			assert.ElementsMatch(t, tt.want, got)
		})
	}
}
