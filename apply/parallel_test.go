package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"pkgsync.dev/pkgsync/apply"
	"pkgsync.dev/pkgsync/desired"
)

// inFlight records the most PATCH requests its transports had in flight at once.
type inFlight struct{ now, most atomic.Int32 }

type inFlightTransport struct {
	next http.RoundTripper
	*inFlight
}

func (c inFlightTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPatch {
		return c.next.RoundTrip(r)
	}
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	return c.next.RoundTrip(r)
}

func inFlightConfig(cfg *rest.Config) (*rest.Config, *inFlight) {
	c := &inFlight{}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return inFlightTransport{next: rt, inFlight: c} })
	return out, c
}

// TestNewObjectsAreCreatedWithoutReads: a pass that creates a package sends one apply per
// object and no read, records the inventory once for all its phases, and still refuses an
// object that exists without the owner's labels, leaving it as it was.
func TestNewObjectsAreCreatedWithoutReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg, counter := countingConfig(management.Config)
	e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
	records := 0
	req := apply.Request{Owner: e.owner, Targets: e.targets, Record: func(context.Context, apply.Inventory) error { records++; return nil }}
	for p := range 3 {
		var objs []*unstructured.Unstructured
		for i := range 4 {
			objs = append(objs, e.configMap(t, fmt.Sprintf("p%d-%d", p, i), map[string]string{"n": "1"}))
		}
		req.Phases = append(req.Phases, desired.Phase{Name: fmt.Sprintf("p%d", p), Objects: objs})
	}
	_, err := e.targets[""].Client.IsObjectNamespaced(req.Phases[0].Objects[0]) // discovery, not counted
	require.NoError(t, err)
	counter.reset()
	res, err := apply.NewEngine(apply.Options{}).Apply(t.Context(), req)
	require.NoError(t, err)
	require.True(t, res.Complete(), res.Summary())
	counts := counter.reset()
	assert.Equal(t, 12, res.Created)
	assert.Zero(t, counts[http.MethodGet], "reads")
	assert.Equal(t, 12, counts[http.MethodPatch], "applies")
	assert.Equal(t, 1, records, "the inventory is recorded once for the pass")

	// Someone else's object of the same name: the create fails without writing, the read
	// finds the collision.
	theirs := e.configMap(t, "theirs", map[string]string{"owner": "someone"})
	require.NoError(t, e.mgmt.Create(t.Context(), theirs.DeepCopy()))
	req.Previous = res.Inventory
	req.Phases[0].Objects = append(req.Phases[0].Objects, e.configMap(t, "theirs", map[string]string{"owner": "pkg"}))
	_, err = apply.NewEngine(apply.Options{}).Apply(t.Context(), req)
	var collision *apply.CollisionError
	require.ErrorAs(t, err, &collision)
	live, _ := get(t, e.mgmt, theirs)
	assert.Equal(t, map[string]any{"owner": "someone"}, live.Object["data"])
	assert.Empty(t, live.GetLabels(), "the existing object is not touched")
}

// TestParallelApplyKeepsOrdersAndReportsEveryObject: a phase of a Namespace, a CRD, a custom
// resource and many objects in the new namespace, applied 8 at a time: the CRD and the Namespace
// come first (each run finishes before the next starts), every object is reported, in the order
// of the phase, and the failures of several objects are all returned.
func TestParallelApplyKeepsOrdersAndReportsEveryObject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg, inFlight := inFlightConfig(management.Config)
	e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
	group := e.ns + ".parallel.example.com"
	ns := e.ns + "-child"
	var objs []*unstructured.Unstructured
	for i := range 40 {
		cm := e.configMap(t, fmt.Sprintf("cm-%02d", i), map[string]string{"n": fmt.Sprint(i)})
		cm.SetNamespace(ns)
		objs = append(objs, cm)
		if i == 10 || i == 30 {
			bad := e.configMap(t, fmt.Sprintf("Bad_%d", i), nil) // not a valid name: refused by the API server
			objs = append(objs, bad)
		}
	}
	objs = append(objs, e.obj(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata: {name: g, namespace: NS}\n", group)))
	objs = append(objs, e.obj(t, fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.%[1]s}
spec:
  group: %[1]s
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group)))
	objs = append(objs, e.obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"))
	t.Cleanup(func() {
		n := &unstructured.Unstructured{}
		n.SetAPIVersion("v1")
		n.SetKind("Namespace")
		n.SetName(ns)
		_ = e.mgmt.Delete(context.Background(), n)
	})

	engine := apply.NewEngine(apply.Options{Concurrency: 8})
	req := apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "all", Objects: objs}}}
	res, err := engine.Apply(t.Context(), req)
	require.Error(t, err)
	assert.ErrorContains(t, err, "Bad_10")
	assert.ErrorContains(t, err, "Bad_30")
	require.GreaterOrEqual(t, len(res.Changes), 42)
	assert.Equal(t, "CustomResourceDefinition", res.Changes[0].Ref.Kind)
	assert.Equal(t, "Namespace", res.Changes[1].Ref.Kind)
	var names []string
	for _, c := range res.Changes[2:] {
		names = append(names, c.Ref.Name)
	}
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("cm-%02d", i))
	}
	assert.Equal(t, want, names[:40], "every object, in the order of the phase")
	assert.Greater(t, inFlight.most.Load(), int32(1), "objects are applied side by side")
	assert.LessOrEqual(t, inFlight.most.Load(), int32(8), "at most Concurrency at once")

	// The next passes apply the custom resource once its CRD is Established.
	req.Previous = res.Inventory
	req.Phases[0].Objects = objs[:0:0]
	for _, o := range objs {
		if o.GetName() != "Bad_10" && o.GetName() != "Bad_30" {
			req.Phases[0].Objects = append(req.Phases[0].Objects, o)
		}
	}
	res = applyUntilComplete(t, engine, req)
	assert.Equal(t, 43, res.Inventory.Len())
}

// TestMaxInFlightBoundsEveryPass: passes running side by side share the Engine's bound.
func TestMaxInFlightBoundsEveryPass(t *testing.T) {
	t.Parallel()
	cfg, inFlight := inFlightConfig(management.Config)
	engine := apply.NewEngine(apply.Options{Concurrency: 8, MaxInFlight: 3})
	var wg sync.WaitGroup
	for range 3 {
		e := newEnv(t)
		e.targets[""] = apply.Target{Client: newClient(t, cfg), Name: "management cluster"}
		var objs []*unstructured.Unstructured
		for i := range 20 {
			objs = append(objs, e.configMap(t, fmt.Sprintf("cm-%d", i), nil))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := engine.Apply(t.Context(), apply.Request{Owner: e.owner, Targets: e.targets, Phases: []desired.Phase{{Name: "all", Objects: objs}}})
			assert.NoError(t, err)
			assert.Equal(t, 20, res.Created)
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, inFlight.most.Load(), int32(3))
}
