package packages

import (
	"bytes"
	"compress/flate"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/lru"

	"pkgsync.dev/pkgsync/desired"
	"pkgsync.dev/pkgsync/render"
)

// renderCache keeps rendered packages by everything that went into them, so an unchanged
// package is neither pulled nor rendered again on each interval, and resources that install one
// package with one configuration share one render when it did not read what differs between
// them (render.Result.Inputs: the resource's own metadata, its HostedCluster). A fleet of
// Packages of one image and configuration then holds one render, not one per Package, as long
// as the package's templates do not name the resource. Concurrent reconciles that need the same
// render wait for one of them to make it, and share its result: callers must not modify it (the
// apply engine copies objects before it changes them).
//
// A render is held with its objects encoded (storedRender) and decoded afresh on every hit: a
// fleet whose package names its namespace holds one render per Package, and decoded objects
// (nested maps) take about four times their JSON (24 against 5.6 KB for ten small ConfigMaps)
// for as long as the cache holds them.
type renderCache struct {
	mu sync.Mutex
	// maxBytes bounds the estimated size of the renders held (storedRender.size).
	maxBytes, bytes int64
	// order holds *renderEntry, most recently used first; entries indexes it by key.
	order   *list.List
	entries map[string]*list.Element
	// inputs holds, per package, configuration and cluster environment (packageKey), what their
	// renders were seen to read: the parts of the options their keys hold.
	inputs *lru.Cache
	// flights merges concurrent renders of one key.
	flights singleflight.Group
	// users maps a resource (namespace/name) to the render it uses last, refs a key to how many
	// resources use it: a render no resource uses any more (all moved to another revision or
	// configuration) is dropped at once, not when the byte bound reaches it, so that an update
	// wave does not hold two renders per resource.
	users map[string]renderUse
	refs  map[string]int
	// observe, when set, is told the entries and bytes held after each change.
	observe func(entries int, bytes int64)
}

// renderUse is the render a resource uses: its key, and what its package's renders read.
type renderUse struct {
	key    string
	inputs render.Inputs
}

type renderEntry struct {
	key    string
	stored storedRender
}

// maxRenderAttempts bounds how often a caller waits for another resource's render before it
// renders on its own: another's render may fail for reasons of its own (its context, its access).
const maxRenderAttempts = 3

// renderInputsEntries bounds the packages whose inputs are remembered; an entry is a few bytes.
const renderInputsEntries = 4096

func newRenderCache(maxBytes int64) *renderCache {
	return &renderCache{maxBytes: maxBytes, order: list.New(), entries: map[string]*list.Element{}, inputs: lru.New(renderInputsEntries),
		users: map[string]renderUse{}, refs: map[string]int{}}
}

// use records that the resource user (namespace/name) now uses the render of key, whose
// package's renders read in, and drops the render it used before when no other resource uses
// that one.
func (c *renderCache) use(user, key string, in render.Inputs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.users[user]
	c.users[user] = renderUse{key: key, inputs: in}
	if ok {
		if old.key == key {
			return
		}
		c.release(old.key)
	}
	c.refs[key]++
}

// reads returns what the last render of the resource user read, and whether it had one. A
// change to something that render did not read leaves it as it was: the resource need not be
// reconciled for it.
func (c *renderCache) reads(user string) (render.Inputs, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.users[user]
	return u.inputs, ok
}

// forget records that the resource user is gone: the render it used is dropped when no other
// resource uses it.
func (c *renderCache) forget(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.users[user]; ok {
		delete(c.users, user)
		c.release(old.key)
	}
}

// release counts one user less of key and drops its render when none is left. Caller holds c.mu.
func (c *renderCache) release(key string) {
	if c.refs[key]--; c.refs[key] > 0 {
		return
	}
	delete(c.refs, key)
	if el, found := c.entries[key]; found {
		c.bytes -= el.Value.(*renderEntry).stored.size
		c.order.Remove(el)
		delete(c.entries, key)
		if c.observe != nil {
			c.observe(len(c.entries), c.bytes)
		}
	}
}

// renderUser names a resource for use and forget.
func renderUser(namespace, name string) string { return namespace + "/" + name }

// render returns the render of content (source.Reference.Content: the repository the package
// is pulled from and its digest) with configDigest and opts: from the cache, from a render
// another reconcile is making of the same key, or from renderFn, which pulls and renders with
// the caller's own context and credentials. shared reports a result renderFn did not make for
// this call: the caller then proves its own access to content.
//
// The key holds the repository, not the digest alone: access is proven to a registry for one of
// its repositories, and a registry answers only for its own. Keyed by digest, a render of a
// private package would be served to whoever names that digest in a registry of their own that
// claims to hold every digest (a HEAD request proves nothing about content).
func (c *renderCache) render(content, configDigest string, opts render.Options, renderFn func() (*render.Result, error)) (*render.Result, bool, error) {
	pkg := packageKey(content, configDigest, opts)
	res, shared, err := c.lookupOrRender(pkg, content, configDigest, opts, renderFn)
	if err == nil {
		in, _ := c.inputsOf(pkg)
		c.use(renderUser(opts.Namespace, opts.Name), renderKey(content, configDigest, in, opts), in)
	}
	return res, shared, err
}

func (c *renderCache) lookupOrRender(pkg, content, configDigest string, opts render.Options, renderFn func() (*render.Result, error)) (res *render.Result, shared bool, err error) {
	lookup := func() (*render.Result, bool) {
		in, known := c.inputsOf(pkg)
		if !known {
			return nil, false
		}
		return c.get(renderKey(content, configDigest, in, opts))
	}
	for attempt := 1; ; attempt++ {
		if cached, ok := lookup(); ok {
			return cached, true, nil
		}
		in, known := c.inputsOf(pkg)
		// Until a render of the package told what it reads, its renders are merged by package:
		// the first tells whether the rest can share it.
		flight := "package:" + pkg
		if known {
			flight = renderKey(content, configDigest, in, opts)
		}
		if attempt > maxRenderAttempts {
			res, err := renderFn()
			if err != nil {
				return nil, false, err
			}
			c.add(content, configDigest, pkg, opts, res)
			return res, false, nil
		}
		ran, hit := false, false
		v, err, _ := c.flights.Do(flight, func() (any, error) {
			ran = true
			// A flight of the same key may have ended between the lookup above and this one.
			if cached, ok := lookup(); ok {
				hit = true
				return cached, nil
			}
			res, err := renderFn()
			if err != nil {
				return nil, err
			}
			c.add(content, configDigest, pkg, opts, res)
			return res, nil
		})
		if ran {
			if err != nil {
				return nil, false, err
			}
			return v.(*render.Result), hit, nil
		}
		// Another reconcile's render of the same key, which read no more than the key holds.
		if err == nil && known && in.Covers(v.(*render.Result).Inputs) {
			return v.(*render.Result), true, nil
		}
		// It failed (for reasons that may be its own) or it was the first render of the package,
		// which told what the key must hold: look again.
	}
}

// add stores a render under the key of what its package's renders read, this one included: a
// render that reads more than the ones before it (a CEL expression reached only with some
// values) widens the key of every later lookup.
func (c *renderCache) add(content, configDigest, pkg string, opts render.Options, res *render.Result) {
	in := res.Inputs
	if learned, ok := c.inputsOf(pkg); ok {
		in = in.Union(learned)
	}
	// Stored before the inputs are learned: a lookup that knows them finds the render.
	c.put(renderKey(content, configDigest, in, opts), res)
	c.learn(pkg, in)
}

func (c *renderCache) inputsOf(pkg string) (render.Inputs, bool) {
	v, ok := c.inputs.Get(pkg)
	if !ok {
		return render.Inputs{}, false
	}
	return v.(render.Inputs), true
}

// learn adds what a render read to what its package's renders read.
func (c *renderCache) learn(pkg string, in render.Inputs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.inputs.Get(pkg); ok {
		in = in.Union(v.(render.Inputs))
	}
	c.inputs.Add(pkg, in)
}

// get returns the render of key, its objects decoded for this caller.
func (c *renderCache) get(key string) (*render.Result, bool) {
	c.mu.Lock()
	el, ok := c.entries[key]
	if !ok {
		c.mu.Unlock()
		return nil, false
	}
	c.order.MoveToFront(el)
	stored := el.Value.(*renderEntry).stored
	c.mu.Unlock()
	res, err := stored.decode()
	if err != nil {
		// Not reached: the bytes were encoded from objects that decoded from JSON. A miss
		// renders again.
		return nil, false
	}
	return res, true
}

// put adds a result and evicts the least recently used ones until the cache fits its bound. A
// result larger than the whole bound is not kept, nor one whose objects do not encode.
func (c *renderCache) put(key string, r *render.Result) {
	stored, err := storeRender(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.bytes -= el.Value.(*renderEntry).stored.size
		c.order.Remove(el)
		delete(c.entries, key)
	}
	if err != nil || stored.size > c.maxBytes {
		return
	}
	c.entries[key] = c.order.PushFront(&renderEntry{key: key, stored: stored})
	c.bytes += stored.size
	for c.bytes > c.maxBytes {
		oldest := c.order.Back()
		e := oldest.Value.(*renderEntry)
		c.order.Remove(oldest)
		delete(c.entries, e.key)
		c.bytes -= e.stored.size
	}
	if c.observe != nil {
		c.observe(len(c.entries), c.bytes)
	}
}

// size returns the number of results held and their estimated size.
func (c *renderCache) size() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}

// storedRender is a render as the cache holds it: the result without its objects, and the
// JSON of every object, phase after phase, compressed. size is the memory it holds, about: the
// compressed bytes and an estimate of the rest. Counting entries would not bound memory: one
// package renders to one ConfigMap, another to thousands of objects. A fleet's renders differ
// in a few names and values each, and the objects of one render repeat each other's keys and
// labels, and compressed they take a fraction of their JSON (docs/benchmarks.md, issue 46's
// fourth round). A hit decompresses once, which costs a fraction of decoding the JSON it had to
// decode anyway.
type storedRender struct {
	result *render.Result
	// packed is the compressed JSON of the objects, unpacked bytes long; lengths[i] holds the
	// length of each of phase i's objects (nil: a phase without objects, as rendered).
	packed   []byte
	unpacked int
	lengths  [][]int
	size     int64
}

// storeRender encodes the objects of r; r itself is not changed.
func storeRender(r *render.Result) (storedRender, error) {
	rest := *r
	rest.Phases = make([]desired.Phase, len(r.Phases))
	s := storedRender{result: &rest, lengths: make([][]int, len(r.Phases)), size: 256}
	var raw bytes.Buffer
	for i, ph := range r.Phases {
		rest.Phases[i] = ph
		rest.Phases[i].Objects = nil
		s.size += 128 + int64(len(ph.ConditionMappings))*128
		if ph.Objects != nil {
			s.lengths[i] = make([]int, len(ph.Objects))
		}
		for j, obj := range ph.Objects {
			data, err := json.Marshal(obj.Object)
			if err != nil {
				return storedRender{}, fmt.Errorf("encode object %d of phase %s: %w", j, ph.Name, err)
			}
			raw.Write(data)
			s.lengths[i][j] = len(data)
			s.size += 8
		}
	}
	packed, err := pack(raw.Bytes())
	if err != nil {
		return storedRender{}, fmt.Errorf("compress the rendered objects: %w", err)
	}
	s.packed, s.unpacked = packed, raw.Len()
	s.size += int64(len(packed))
	s.size += valueSize(r.Config)
	if r.Manifest != nil {
		// The manifest is a typed struct (its schema included); its JSON is about its size.
		if data, err := json.Marshal(r.Manifest); err == nil {
			s.size += int64(len(data))
		}
	}
	return s, nil
}

// decode returns the render with objects of its own. The JSON decoding is the one the
// renderer decodes objects with (integers as int64, other numbers as float64), so a decoded
// object equals the one stored; a float64 of integral value comes back an int64, as it would
// from the API server (the renderer's YAML-to-JSON step writes such numbers as integers).
func (s storedRender) decode() (*render.Result, error) {
	raw, err := unpack(s.packed, s.unpacked)
	if err != nil {
		return nil, fmt.Errorf("decompress the rendered objects: %w", err)
	}
	res := *s.result
	res.Phases = slices.Clone(s.result.Phases)
	off := 0
	for i := range res.Phases {
		if s.lengths[i] == nil {
			continue // a phase without objects, as rendered
		}
		objs := make([]*unstructured.Unstructured, len(s.lengths[i]))
		for j, n := range s.lengths[i] {
			if off+n > len(raw) {
				return nil, fmt.Errorf("decode object %d of phase %s: %d bytes stored, %d more needed", j, res.Phases[i].Name, len(raw), off+n-len(raw))
			}
			var m map[string]any
			if err := utiljson.Unmarshal(raw[off:off+n], &m); err != nil {
				return nil, fmt.Errorf("decode object %d of phase %s: %w", j, res.Phases[i].Name, err)
			}
			off += n
			objs[j] = &unstructured.Unstructured{Object: m}
		}
		res.Phases[i].Objects = objs
	}
	return &res, nil
}

// Compressors and decompressors are reused: a flate writer holds about 1 MB of state, a reader
// its 32 KB window, and a fleet's converge stores and decodes thousands of renders.
var (
	flateWriters = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(nil, flate.BestSpeed) // only an invalid level fails
		return w
	}}
	flateReaders = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
)

// pack compresses data into a slice of its own length.
func pack(data []byte) ([]byte, error) {
	var out bytes.Buffer
	w := flateWriters.Get().(*flate.Writer)
	defer func() {
		w.Reset(io.Discard) // pooled, it must not keep out reachable
		flateWriters.Put(w)
	}()
	w.Reset(&out)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(out.Bytes()), nil
}

// unpack decompresses what pack made of n bytes.
func unpack(packed []byte, n int) ([]byte, error) {
	r := flateReaders.Get().(io.ReadCloser)
	defer func() {
		_ = r.(flate.Resetter).Reset(bytes.NewReader(nil), nil) // nor packed
		flateReaders.Put(r)
	}()
	if err := r.(flate.Resetter).Reset(bytes.NewReader(packed), nil); err != nil {
		return nil, err
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Per-item costs of valueSize: a map's header and buckets, one entry (key and value headers),
// one slice element (an interface), a scalar.
const (
	mapBytes   = 48
	entryBytes = 48
	elemBytes  = 16
)

// valueSize estimates the memory a decoded JSON value holds: its string bytes plus a fixed cost
// per map entry and slice element.
func valueSize(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(mapBytes)
		for k, e := range v {
			n += entryBytes + int64(len(k)) + valueSize(e)
		}
		return n
	case []any:
		n := int64(24)
		for _, e := range v {
			n += elemBytes + valueSize(e)
		}
		return n
	case string:
		return int64(len(v))
	default:
		return 8
	}
}

// packageKey fingerprints what every render of a package with a configuration on this cluster
// shares: the content (repository and digest), the configuration, the component and the
// cluster-wide environment.
func packageKey(content, configDigest string, opts render.Options) string {
	return renderKey(content, configDigest, render.Inputs{}, opts)
}

// renderKey fingerprints the inputs of a render: the content (repository and digest), the
// configuration, and of the options what in says the package's renders read.
func renderKey(content, configDigest string, in render.Inputs, opts render.Options) string {
	opts = in.Only(opts)
	opts.Config = nil // represented by configDigest
	// Templates see no labels and empty labels alike (render turns both into an empty map), so
	// the key must too: a Package whose only annotation is the reconcile request has an empty
	// map after userAnnotations, and must not render again for it.
	if len(opts.Labels) == 0 {
		opts.Labels = nil
	}
	if len(opts.Annotations) == 0 {
		opts.Annotations = nil
	}
	data, _ := json.Marshal(struct {
		Inputs  render.Inputs
		Options render.Options
	}{in, opts})
	h := sha256.New()
	h.Write([]byte(content))
	h.Write([]byte{0})
	h.Write([]byte(configDigest))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
