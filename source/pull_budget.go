package source

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// defaultPullBytes bounds the bytes that pulls in flight hold unpacked when Options.PullBytes is
// zero: one package of the default MaxUncompressedBytes (128 MiB), or several smaller ones. With
// the memory cache's 64 MiB it keeps what packages cost within the controller's GOMEMLIMIT
// (192 MiB, config/manager).
const defaultPullBytes = 128 << 20

// pullBudget bounds, for the whole process, the bytes of files that pulls in flight have
// unpacked. A pull takes budget for each file before reading it and gives it all back when it
// ends: its artifact is then in the memory cache, which CacheBytes bounds, or with the callers.
// A pull that finds the budget spent waits for it, as long as its context allows.
type pullBudget struct {
	sem  *semaphore.Weighted // nil: no bound
	size int64
	// held and waiting count the bytes taken and the pulls waiting, for tests.
	held, waiting atomic.Int64
}

// newPullBudget returns the budget Options.PullBytes asks for: zero the default (at least
// limits.MaxUncompressedBytes), negative none. A budget below MaxUncompressedBytes would make a
// package within the limits wait for ever.
func newPullBudget(n int64, limits Limits) (*pullBudget, error) {
	switch {
	case n < 0:
		return &pullBudget{}, nil
	case n == 0:
		n = max(defaultPullBytes, limits.MaxUncompressedBytes)
	case n < limits.MaxUncompressedBytes:
		return nil, fmt.Errorf("PullBytes %d is below Limits.MaxUncompressedBytes %d: a package within the limits could never be unpacked", n, limits.MaxUncompressedBytes)
	}
	return &pullBudget{sem: semaphore.NewWeighted(n), size: n}, nil
}

// acquire takes n bytes of the budget, waiting while ctx allows.
func (b *pullBudget) acquire(ctx context.Context, n int64) error {
	if b.sem != nil {
		b.waiting.Add(1)
		err := b.sem.Acquire(ctx, n)
		b.waiting.Add(-1)
		if err != nil {
			return fmt.Errorf("wait for %d bytes of the %d-byte budget for pulls in flight: %w", n, b.size, err)
		}
	}
	b.held.Add(n)
	return nil
}

// release gives back n bytes.
func (b *pullBudget) release(n int64) {
	b.held.Add(-n)
	if b.sem != nil {
		b.sem.Release(n)
	}
}
