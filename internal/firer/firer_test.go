package firer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// batches is a store whose trigger has more events left for the first firings (More):
// each firing is noted.
type batches struct {
	mu    sync.Mutex
	fired []time.Time
	more  int // firings that leave more
}

func (b *batches) Listen(ctx context.Context, _ string, ready func(), notify func(payload string)) error {
	ready()
	notify("t1")
	<-ctx.Done()
	return ctx.Err()
}

func (b *batches) PendingTriggers(context.Context) ([]string, error) { return nil, nil }

func (b *batches) DeleteExpiredTriggerEvents(context.Context, job.Fence) (int, error) { return 0, nil }

func (b *batches) FireTrigger(_ context.Context, _ job.Fence, id string, _ time.Time) (store.TriggerFiring, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fired = append(b.fired, time.Now())
	return store.TriggerFiring{Kind: "webhook", Started: []string{id}, More: len(b.fired) <= b.more}, nil
}

func (b *batches) firings() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.fired)
}

// A firing that left more events (its bound of runs started) is followed at once by the
// next, until none is left: the events of a busy trigger wait neither for the busy
// retry nor for the safety-net pass, and nothing fires after the last.
func TestATriggerWithMoreEventsIsFiredAgainAtOnce(t *testing.T) {
	t.Parallel()
	db := &batches{more: 4}
	f := New(Config{Workers: 2, Interval: time.Hour, BusyRetry: time.Hour}, db)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx, 1) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	require.Eventually(t, func() bool { return db.firings() == 5 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 5, db.firings(), "none after the last")
}
