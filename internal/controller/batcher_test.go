package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A batcher that waited for company (as the recorder once did, up to 50 ms) made every
// change of an idle system wait for a timer; one that wrote each item alone would cost a
// converge a round trip per row. Group commit does neither.
func TestBatcherWritesAtOnceWhenIdleAndGathersWhatArrivesDuringAWrite(t *testing.T) {
	writes := make(chan []int)
	release := make(chan struct{})
	b := NewBatcher(3, func(_ context.Context, batch []int) {
		writes <- batch
		<-release
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(t.Context())
	}()
	next := func() []int {
		t.Helper()
		select {
		case batch := <-writes:
			return batch
		case <-time.After(10 * time.Second):
			t.Fatal("no write")
			return nil
		}
	}

	// Idle: the first item is written at once, alone, with no timer and no company.
	require.True(t, b.Add(1))
	require.Equal(t, []int{1}, next())
	// While that write is in flight, items wait, and go together into the next write, up
	// to the bound; the rest into the one after.
	for i := 2; i <= 4; i++ {
		require.True(t, b.Add(i))
	}
	added := make(chan bool)
	go func() { added <- b.Add(5) }() // blocks: the bound is reached (backpressure)
	release <- struct{}{}
	require.Equal(t, []int{2, 3, 4}, next())
	release <- struct{}{}
	require.True(t, <-added)
	require.Equal(t, []int{5}, next())
	release <- struct{}{}

	// Stop writes what was added before it, then run returns; later adds are refused.
	require.True(t, b.Add(6))
	b.Stop()
	require.Equal(t, []int{6}, next())
	release <- struct{}{}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after stop")
	}
	require.False(t, b.Add(7))
}
