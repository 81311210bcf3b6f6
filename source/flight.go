package source

import (
	"context"
	"sync"
	"time"
)

// flightGroup merges concurrent calls with one key into one, as singleflight does, and ends the
// shared call once no caller waits for it. The call runs with the context values of the caller
// that started it, but not its cancellation: a caller merged into another's call is not failed
// because the first gave up. The call's own context is cancelled when the last caller waiting
// for it leaves, so a download nobody waits for any more stops, and lets go of what it holds,
// instead of running on to its timeout.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flightCall
}

type flightCall struct {
	waiters int
	cancel  context.CancelFunc
	done    chan struct{}
	val     any
	err     error
}

// do runs fn once for the callers of key that overlap, bounded by timeout, and returns its
// result, or ctx's error when ctx ends first.
func (g *flightGroup) do(ctx context.Context, key string, timeout time.Duration, fn func(context.Context) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*flightCall{}
	}
	call, ok := g.calls[key]
	if !ok {
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		call = &flightCall{cancel: cancel, done: make(chan struct{})}
		g.calls[key] = call
		go func() {
			defer close(call.done)
			defer cancel()
			call.val, call.err = fn(callCtx)
			g.forget(key, call)
		}()
	}
	call.waiters++
	g.mu.Unlock()

	select {
	case <-call.done:
		return call.val, call.err
	case <-ctx.Done():
		g.mu.Lock()
		call.waiters--
		if call.waiters == 0 {
			// Nobody waits: stop the call, and let the next caller start a fresh one rather
			// than join one that is ending.
			call.cancel()
			if g.calls[key] == call {
				delete(g.calls, key)
			}
		}
		g.mu.Unlock()
		return nil, ctx.Err()
	}
}

// forget removes call, once finished, so that the next caller of key starts a new one.
func (g *flightGroup) forget(key string, call *flightCall) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls[key] == call {
		delete(g.calls, key)
	}
}
