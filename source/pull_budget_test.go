package source

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Pulls in flight share one budget for what they unpack: a pull that would go over it waits
// until another gives its bytes back, rather than adding its own to the heap.
func TestPullBudgetMakesPullsWait(t *testing.T) {
	t.Parallel()
	const fileBytes = 3 << 19 // two do not fit in the budget
	reg, host := newStallingRegistry(t, fileBytes)
	limits := Limits{MaxUncompressedBytes: 2 << 20}
	c := newClient(t, Options{PlainHTTPHosts: []string{host}, Limits: limits, PullBytes: 2 << 20})

	firstCtx, cancelFirst := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := c.Pull(firstCtx, mustRef(t, host+"/first@"+reg.digest()), nil)
		first <- err
	}()
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, int64(1), reg.stalled.Load())
		assert.Equal(ct, int64(fileBytes), c.pullBudget.held.Load())
	}, flightWait, flightTick)

	// Another repository, so another pull: its file does not fit beside the first's.
	second := make(chan error, 1)
	go func() {
		_, err := c.Pull(t.Context(), mustRef(t, host+"/second@"+reg.digest()), nil)
		second <- err
	}()
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, int64(1), c.pullBudget.waiting.Load())
	}, flightWait, flightTick)
	assert.Equal(t, int64(fileBytes), c.pullBudget.held.Load(), "the second pull holds nothing")

	// The first gives up: the second gets the budget, and its package once the registry ends it.
	cancelFirst()
	require.ErrorIs(t, <-first, context.Canceled)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Zero(ct, c.pullBudget.waiting.Load())
		assert.Equal(ct, int64(fileBytes), c.pullBudget.held.Load())
	}, flightWait, flightTick)
	reg.releaseAll()
	require.NoError(t, <-second)
	assert.Zero(t, c.pullBudget.held.Load(), "a finished pull holds no budget; its artifact is the memory cache's")
}

// A pull that waits for the budget ends with its caller, and says what it waited for.
func TestPullBudgetWaitEndsWithCaller(t *testing.T) {
	t.Parallel()
	const fileBytes = 3 << 19
	reg, host := newStallingRegistry(t, fileBytes)
	c := newClient(t, Options{PlainHTTPHosts: []string{host}, Limits: Limits{MaxUncompressedBytes: 2 << 20}, PullBytes: 2 << 20})
	go func() { _, _ = c.Pull(t.Context(), mustRef(t, host+"/first@"+reg.digest()), nil) }()
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, int64(fileBytes), c.pullBudget.held.Load())
	}, flightWait, flightTick)

	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() {
		_, err := c.Pull(ctx, mustRef(t, host+"/second@"+reg.digest()), nil)
		second <- err
	}()
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, int64(1), c.pullBudget.waiting.Load())
	}, flightWait, flightTick)
	cancel()
	err := <-second
	require.ErrorIs(t, err, context.Canceled)
	reg.releaseAll()
}

func TestPullBudgetOptions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		pullBytes int64
		limits    Limits
		want      int64 // 0: no bound
		wantErr   bool
	}{
		{name: "default", want: 128 << 20},
		{name: "default follows a larger limit", limits: Limits{MaxUncompressedBytes: 512 << 20}, want: 512 << 20},
		{name: "set", pullBytes: 256 << 20, want: 256 << 20},
		{name: "negative sets no bound", pullBytes: -1},
		{name: "below the largest package", pullBytes: 64 << 20, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewClient(Options{PullBytes: tt.pullBytes, Limits: tt.limits})
			if tt.wantErr {
				require.ErrorContains(t, err, "MaxUncompressedBytes")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.pullBudget.size)
		})
	}
}
