package source

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/opencontainers/go-digest"
)

// defaultCacheBytes bounds the memory cache when Options.CacheBytes is zero.
const defaultCacheBytes = 64 << 20

// entryOverhead approximates the memory one cached file costs besides its data.
const entryOverhead = 256

// memoryCache is an LRU of unpacked artifacts bounded by their size in bytes, keyed by
// Reference.Content. It is written here because the LRUs at hand (k8s.io/utils/lru) bound the
// number of entries, and artifacts differ in size by orders of magnitude.
type memoryCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	order *list.List // of memoryEntry, most recently used first
	items map[string]*list.Element
}

type memoryEntry struct {
	key string
	a   *Artifact
}

func newMemoryCache(max int64) *memoryCache {
	if max == 0 {
		max = defaultCacheBytes
	}
	return &memoryCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *memoryCache) get(key string) *Artifact {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(memoryEntry).a
}

// add stores a under key, evicting the least recently used artifacts. An artifact larger than
// the whole cache is not stored.
func (c *memoryCache) add(key string, a *Artifact) {
	if a.size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.order.PushFront(memoryEntry{key: key, a: a})
	c.used += a.size
	for c.used > c.max {
		oldest := c.order.Back()
		evicted := c.order.Remove(oldest).(memoryEntry)
		delete(c.items, evicted.key)
		c.used -= evicted.a.size
	}
}

// diskCache keeps verified blobs as dir/blobs/ALG/HEX, the layout of an OCI image layout.
type diskCache struct {
	dir string
}

// forRepository returns the cache of the repository ref names: blobs are kept per repository,
// so that content is only ever read back for the repository, hence the registry, it came from.
// A registry answers for its own repositories alone; one an attacker runs would otherwise vouch
// for a manifest whose layers come from another registry's private repository. The directory
// name is a hash, so no reference can name a path outside the cache. Nil when d is nil.
func (d *diskCache) forRepository(ref Reference) *diskCache {
	if d == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(ref.Name()))
	return &diskCache{dir: filepath.Join(d.dir, "repositories", hex.EncodeToString(sum[:]))}
}

func (d *diskCache) path(dgst digest.Digest) string {
	return filepath.Join(d.dir, "blobs", dgst.Algorithm().String(), dgst.Encoded())
}

// open returns the cached blob, or nil when it is not cached. Callers verify what they read.
func (d *diskCache) open(dgst digest.Digest) (io.ReadCloser, error) {
	if err := dgst.Validate(); err != nil {
		return nil, err
	}
	f, err := os.Open(d.path(dgst))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// writer returns a file to write the blob to; commit renames it into place once the caller
// has verified the content, abort drops it.
func (d *diskCache) writer(dgst digest.Digest) (f *os.File, commit func() error, abort func(), err error) {
	if err := dgst.Validate(); err != nil {
		return nil, nil, nil, err
	}
	final := d.path(dgst)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return nil, nil, nil, fmt.Errorf("create cache directory: %w", err)
	}
	f, err = os.CreateTemp(filepath.Dir(final), ".tmp-"+dgst.Encoded()+"-*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create cache file: %w", err)
	}
	commit = func() error {
		if err := f.Close(); err != nil {
			_ = os.Remove(f.Name())
			return err
		}
		return os.Rename(f.Name(), final)
	}
	abort = func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
	return f, commit, abort, nil
}
