package source

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A shared call runs on while any caller waits for it, and is cancelled as the last one leaves;
// the next caller starts a new one.
func TestFlightCancelledWithLastWaiter(t *testing.T) {
	t.Parallel()
	var g flightGroup
	started := make(chan context.Context, 2)
	fn := func(ctx context.Context) (any, error) {
		started <- ctx
		<-ctx.Done()
		return nil, ctx.Err()
	}
	firstCtx, cancelFirst := context.WithCancel(t.Context())
	secondCtx, cancelSecond := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := g.do(firstCtx, "k", time.Hour, fn); first <- err }()
	callCtx := <-started
	second := make(chan error, 1)
	go func() { _, err := g.do(secondCtx, "k", time.Hour, fn); second <- err }()
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, 2, g.waiters("k"))
	}, flightWait, flightTick)

	cancelFirst()
	require.ErrorIs(t, <-first, context.Canceled)
	assert.NoError(t, callCtx.Err(), "the call runs on for the second caller")

	cancelSecond()
	require.ErrorIs(t, <-second, context.Canceled)
	assert.ErrorIs(t, callCtx.Err(), context.Canceled, "nobody waits: the call is cancelled")

	// The next caller does not join the ending call.
	third := make(chan error, 1)
	go func() {
		_, err := g.do(t.Context(), "k", time.Hour, func(context.Context) (any, error) { return "fresh", nil })
		third <- err
	}()
	require.NoError(t, <-third)
}
