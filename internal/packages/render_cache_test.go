package packages

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pkgsync.dev/pkgsync/desired"
	"pkgsync.dev/pkgsync/internal/reconciler"
	"pkgsync.dev/pkgsync/render"
	"pkgsync.dev/pkgsync/source"
)

// resultOf is a render of n ConfigMaps holding size bytes of data each, random (base64) so
// that the cache's compression cannot make much less of them.
func resultOf(n, size int, in render.Inputs) *render.Result {
	ph := desired.Phase{Name: "deploy"}
	for i := range n {
		ph.Objects = append(ph.Objects, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i)},
			"data":     map[string]any{"payload": randomText(i, size)},
		}})
	}
	return &render.Result{Phases: []desired.Phase{ph}, Inputs: in}
}

// randomText returns size characters of base64, the same for the same seed.
func randomText(seed, size int) string {
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(seed), 46))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return base64.StdEncoding.EncodeToString(data)[:size]
}

// The cache is bounded by the estimated size of what it holds, not by a count: large renders
// evict the least recently used ones, a render larger than the bound is not kept.
func TestRenderCacheBoundedByBytes(t *testing.T) {
	t.Parallel()
	one := resultOf(10, 10_000, render.Inputs{})
	stored, err := storeRender(one)
	require.NoError(t, err)
	size := stored.size
	// Compressed, base64 takes its 6 bits a character: about 75 of the 100 KB.
	assert.Greater(t, size, int64(70_000), "the estimate counts the objects' compressed data")
	assert.Less(t, size, int64(110_000))

	c := newRenderCache(3*size + size/2)
	for i := range 3 {
		c.put(fmt.Sprint(i), resultOf(10, 10_000, render.Inputs{}))
	}
	entries, bytes := c.size()
	assert.Equal(t, 3, entries)
	assert.Equal(t, 3*size, bytes)

	_, ok := c.get("0") // now the most recently used
	require.True(t, ok)
	c.put("3", resultOf(10, 10_000, render.Inputs{}))
	entries, bytes = c.size()
	assert.Equal(t, 3, entries)
	assert.LessOrEqual(t, bytes, c.maxBytes)
	_, ok = c.get("1")
	assert.False(t, ok, "the least recently used render is evicted")
	for _, key := range []string{"0", "2", "3"} {
		_, ok = c.get(key)
		assert.True(t, ok, key)
	}

	c.put("big", resultOf(40, 10_000, render.Inputs{}))
	_, ok = c.get("big")
	assert.False(t, ok, "a render larger than the bound is not kept")
	entries, _ = c.size()
	assert.Equal(t, 3, entries, "and evicts nothing")

	// Many small renders fit where few large ones do.
	small := newRenderCache(3*size + size/2)
	for i := range 100 {
		small.put(fmt.Sprint(i), resultOf(1, 100, render.Inputs{}))
	}
	entries, _ = small.size()
	assert.Equal(t, 100, entries)
}

// A fleet's renders are kept compressed: the objects of one render repeat each other's keys,
// labels and annotations, so they take a fraction of their JSON (issue 46: a thousand hosted
// clusters each held their render's JSON).
func TestRenderCacheCompressesObjects(t *testing.T) {
	t.Parallel()
	ph := desired.Phase{Name: "deploy"}
	for i := range 10 {
		ph.Objects = append(ph.Objects, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{
				"name": fmt.Sprintf("clusters-cluster-0042-settings-%d", i), "namespace": "clusters-cluster-0042",
				"labels":      map[string]any{"app.kubernetes.io/name": "addon", "app.kubernetes.io/part-of": "fleet-addons", "app.kubernetes.io/managed-by": "pkgsync"},
				"annotations": map[string]any{"pkgsync.dev/phase": "deploy", "example.com/owner": "platform-team"},
			},
			"data": map[string]any{"cluster": "cluster-0042", "region": "eu-west-1", "replicas": "3", "index": fmt.Sprint(i),
				"config.yaml": strings.Repeat(fmt.Sprintf("key-%d: value for cluster-0042\n", i), 20)},
		}})
	}
	r := &render.Result{Phases: []desired.Phase{ph}}
	plain := 0
	for _, obj := range ph.Objects {
		data, err := json.Marshal(obj.Object)
		require.NoError(t, err)
		plain += len(data)
	}
	stored, err := storeRender(r)
	require.NoError(t, err)
	t.Logf("10 ConfigMaps: %d bytes of JSON, %d compressed, size %d", plain, len(stored.packed), stored.size)
	assert.Less(t, len(stored.packed), plain/4, "compressed to less than a quarter")
	assert.Less(t, stored.size, int64(plain/2))
	got, err := stored.decode()
	require.NoError(t, err)
	assert.Equal(t, r, got)
}

// A render comes out of the cache as it went in, with objects of its own on every hit: a caller
// that changes what it got changes nothing the next one gets.
func TestRenderCacheKeepsRendersEncoded(t *testing.T) {
	t.Parallel()
	obj := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "app", "labels": map[string]any{"a": "b"}, "annotations": map[string]any{}},
		"spec": map[string]any{
			"replicas": int64(3), "paused": false, "progressDeadlineSeconds": nil,
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "c", "args": []any{"--ratio", "0.5"}, "resources": map[string]any{}},
			}}},
			"ratio": 0.25, "big": int64(1) << 53, "empty": []any{},
		},
	}
	in := &render.Result{
		Phases: []desired.Phase{
			{Name: "setup", Class: "hosted-cluster"},
			{Name: "deploy", Objects: []*unstructured.Unstructured{{Object: obj}},
				ConditionMappings: []desired.ConditionMapping{{Object: 0, Source: "Available", Destination: "example.com/Available"}}},
		},
		Config: map[string]any{"replicas": int64(3)}, Inputs: render.Inputs{Package: true},
		Warnings: []render.Warning{{Message: "dropped"}},
	}
	want := &unstructured.Unstructured{Object: obj}
	want = want.DeepCopy()
	c := newRenderCache(1 << 20)
	c.put("k", in)
	got, ok := c.get("k")
	require.True(t, ok)
	assert.Equal(t, in, got)
	assert.Equal(t, want, got.Phases[1].Objects[0])
	assert.NotSame(t, in.Phases[1].Objects[0], got.Phases[1].Objects[0])

	got.Phases[1].Objects[0].SetName("changed")
	got.Phases[1].Objects = nil
	again, ok := c.get("k")
	require.True(t, ok)
	assert.Equal(t, want, again.Phases[1].Objects[0], "a change to one hit is not seen by the next")
	assert.Equal(t, "app", in.Phases[1].Objects[0].GetName(), "nor by the result stored")
}

// Resources that install one package with one configuration share a render that read none of
// what differs between them; concurrent reconciles wait for one render instead of each making
// their own. A render that read the resource is made per resource.
func TestRenderCacheShares(t *testing.T) {
	t.Parallel()
	optsFor := func(ns string) render.Options {
		return render.Options{Name: "app", Namespace: ns, Image: "r/app:v1", Config: []byte(`{"a":1}`),
			Environment: render.Environment{KubernetesVersion: "v1.36.3", HostedCluster: &render.HostedCluster{Name: ns}}}
	}
	run := func(t *testing.T, c *renderCache, digest string, in render.Inputs, callers int) (renders int64, shared int64) {
		t.Helper()
		var made, fromOthers atomic.Int64
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				res, wasShared, err := c.render(digest, "sha256:c", optsFor(fmt.Sprint("ns-", i)), func() (*render.Result, error) {
					made.Add(1)
					<-release // every caller is in flight before the first render ends
					return resultOf(2, 10, in), nil
				})
				if assert.NoError(t, err) && assert.NotNil(t, res) && wasShared {
					fromOthers.Add(1)
				}
			})
		}
		close(release)
		wg.Wait()
		return made.Load(), fromOthers.Load()
	}

	t.Run("a render that reads nothing of the resource is shared", func(t *testing.T) {
		t.Parallel()
		c := newRenderCache(1 << 20)
		renders, shared := run(t, c, "sha256:a", render.Inputs{}, 50)
		assert.Equal(t, int64(1), renders)
		assert.Equal(t, int64(49), shared)
		renders, shared = run(t, c, "sha256:a", render.Inputs{}, 5)
		assert.Zero(t, renders, "later reconciles find it in the cache")
		assert.Equal(t, int64(5), shared)
	})
	t.Run("a render that reads the namespace is made per resource", func(t *testing.T) {
		t.Parallel()
		c := newRenderCache(1 << 20)
		renders, _ := run(t, c, "sha256:b", render.Inputs{Package: true}, 20)
		assert.Equal(t, int64(20), renders)
		renders, shared := run(t, c, "sha256:b", render.Inputs{Package: true}, 20)
		assert.Zero(t, renders)
		assert.Equal(t, int64(20), shared)
	})
	t.Run("a failed render is not shared", func(t *testing.T) {
		t.Parallel()
		c := newRenderCache(1 << 20)
		var calls atomic.Int64
		_, _, err := c.render("sha256:f", "sha256:c", optsFor("a"), func() (*render.Result, error) {
			calls.Add(1)
			return nil, errors.New("denied")
		})
		require.ErrorContains(t, err, "denied")
		res, shared, err := c.render("sha256:f", "sha256:c", optsFor("b"), func() (*render.Result, error) {
			calls.Add(1)
			return resultOf(1, 1, render.Inputs{}), nil
		})
		require.NoError(t, err)
		assert.NotNil(t, res)
		assert.False(t, shared)
		assert.Equal(t, int64(2), calls.Load())
	})
	t.Run("a render that reads more than the ones before widens the key", func(t *testing.T) {
		t.Parallel()
		c := newRenderCache(1 << 20)
		_, _, err := c.render("sha256:w", "sha256:c", optsFor("a"), func() (*render.Result, error) {
			return resultOf(1, 1, render.Inputs{}), nil
		})
		require.NoError(t, err)
		c.add("sha256:w", "sha256:c", packageKey("sha256:w", "sha256:c", optsFor("b")), optsFor("b"), resultOf(1, 1, render.Inputs{HostedCluster: true}))
		renders := 0
		_, shared, err := c.render("sha256:w", "sha256:c", optsFor("c"), func() (*render.Result, error) {
			renders++
			return resultOf(1, 1, render.Inputs{HostedCluster: true}), nil
		})
		require.NoError(t, err)
		assert.False(t, shared, "a resource of another HostedCluster renders its own")
		assert.Equal(t, 1, renders)
	})
}

// A render no resource uses any more is dropped as soon as the last one moves on (an update
// wave then holds one render per resource, not the old and the new), and kept while any uses it.
func TestRenderCacheDropsUnusedRenders(t *testing.T) {
	t.Parallel()
	c := newRenderCache(64 << 20)
	renders := 0
	renderFn := func() (*render.Result, error) { renders++; return resultOf(1, 10, render.Inputs{}), nil }
	a := render.Options{Namespace: "ns-a", Name: "addon"}
	b := render.Options{Namespace: "ns-b", Name: "addon"}
	for _, opts := range []render.Options{a, b} {
		_, _, err := c.render("sha256:v1", "", opts, renderFn)
		require.NoError(t, err)
	}
	require.Equal(t, 1, renders, "the two resources share the v1 render")

	_, _, err := c.render("sha256:v2", "", a, renderFn)
	require.NoError(t, err)
	entries, _ := c.size()
	assert.Equal(t, 2, entries, "b still uses v1")
	_, _, err = c.render("sha256:v1", "", b, renderFn)
	require.NoError(t, err)
	assert.Equal(t, 2, renders, "v1 was kept for b")

	_, _, err = c.render("sha256:v2", "", b, renderFn)
	require.NoError(t, err)
	entries, _ = c.size()
	assert.Equal(t, 1, entries, "nobody uses v1 any more: dropped")
	assert.Equal(t, 2, renders, "b shares a's v2 render")
}

// A resource that is deleted lets go of its render: dropped when no other resource uses it.
func TestRenderCacheForgetsDeletedResources(t *testing.T) {
	t.Parallel()
	c := newRenderCache(64 << 20)
	renderFn := func() (*render.Result, error) { return resultOf(1, 10, render.Inputs{}), nil }
	a := render.Options{Namespace: "ns-a", Name: "addon"}
	b := render.Options{Namespace: "ns-b", Name: "addon"}
	for _, opts := range []render.Options{a, b} {
		_, _, err := c.render("sha256:v1", "", opts, renderFn)
		require.NoError(t, err)
	}
	c.forget(renderUser(a.Namespace, a.Name))
	entries, _ := c.size()
	assert.Equal(t, 1, entries, "b still uses it")
	c.forget(renderUser(b.Namespace, b.Name))
	c.forget(renderUser(b.Namespace, b.Name)) // deleting is told on every reconcile of a deleted resource
	entries, _ = c.size()
	assert.Equal(t, 0, entries, "nobody uses it any more")
	assert.Empty(t, c.users)
	assert.Empty(t, c.refs)
}

// TestRenderKeyWithOverrides: the .images rewrite of --registry-host-overrides leaves render
// keys apart. A func field that failed to marshal once made every key the same, sharing one
// namespace's render with every other.
func TestRenderKeyWithOverrides(t *testing.T) {
	t.Parallel()
	o := reconciler.Options{ImageOverrides: source.Overrides{Hosts: map[string]string{"quay.io": "mirror.example.com"}}}
	relocate := o.RelocateImage()
	assert.Equal(t, "mirror.example.com/team/app@sha256:x", relocate("quay.io/team/app@sha256:x"))
	assert.Nil(t, reconciler.Options{}.RelocateImage())

	in := render.Inputs{Package: true}
	a := renderKey("r/p@sha256:a", "c", in, render.Options{Namespace: "a", RelocateImage: relocate})
	b := renderKey("r/p@sha256:a", "c", in, render.Options{Namespace: "b", RelocateImage: relocate})
	assert.NotEqual(t, a, b)
}
