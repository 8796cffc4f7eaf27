package firer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// noBacklog is the part of a fake store with no trigger pending at a term's start and no
// event to expire.
type noBacklog struct{}

func (noBacklog) PendingTriggers(context.Context) ([]string, error) { return nil, nil }

func (noBacklog) DeleteExpiredTriggerEvents(context.Context, job.Fence) (int, error) { return 0, nil }

// batches is a store whose trigger has more events left for the first firings (More):
// each firing is noted.
type batches struct {
	noBacklog
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
	f := New(Config{Settings: controller.Settings{Workers: 2, Interval: time.Hour}, BusyRetry: time.Hour}, db)
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

// held is a store with a pending event on each of n triggers whose firings wait for
// release, counting those in flight.
type held struct {
	noBacklog
	n       int
	release chan struct{}

	mu       sync.Mutex
	inFlight int
}

func (h *held) Listen(ctx context.Context, _ string, ready func(), notify func(payload string)) error {
	ready()
	for i := range h.n {
		notify(fmt.Sprintf("t%d", i))
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *held) FireTrigger(ctx context.Context, _ job.Fence, id string, _ time.Time) (store.TriggerFiring, error) {
	h.mu.Lock()
	h.inFlight++
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return store.TriggerFiring{Kind: "webhook", Started: []string{id}}, nil
}

func (h *held) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight
}

// The triggers of 8 targets fire side by side with the default workers: a firing waits
// on the database (p50 25-45 ms, p99 0.3-0.45 s on a loaded machine), and with 4 workers
// 100 events a second on 10 triggers kept them all busy: the firer's queue waited as long
// as a firing (mean 65-103 ms; bench/triggers, issue 42). Firings of one trigger still take
// turns (the queue hands a key to one worker at a time).
func TestTheFiringsOfEightTriggersAreInFlightAtOnce(t *testing.T) {
	t.Parallel()
	h := &held{n: 8, release: make(chan struct{})}
	f := New(Config{Settings: controller.Settings{Interval: time.Hour}, BusyRetry: time.Hour}, h)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx, 1) })
	defer func() {
		close(h.release)
		cancel()
		wg.Wait()
	}()
	require.Eventually(t, func() bool { return h.count() == h.n }, 5*time.Second, time.Millisecond, "every trigger's firing in flight")
}
