package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/backoff"
)

// A loop that keeps failing waits twice as long each time, never more than the maximum,
// and from the start again after a success: a database down for an hour is asked every
// max, not ever less often, and one back for a while is not punished for an old outage.
func TestTheDelayDoublesUpToTheMaximumAndStartsAgainAfterAReset(t *testing.T) {
	t.Parallel()
	b := backoff.New(time.Millisecond, 5*time.Millisecond)
	var seen []time.Duration
	for range 5 {
		seen = append(seen, b.Next())
		require.True(t, b.Wait(t.Context()))
	}
	require.Equal(t, []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}, seen)
	b.Reset()
	require.Equal(t, time.Millisecond, b.Next())
}

// A stopping process does not sit out a long delay: Wait ends with its context.
func TestWaitEndsAtOnceWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	b := backoff.New(time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	require.False(t, b.Wait(ctx))
	require.Less(t, time.Since(start), time.Minute)
}
