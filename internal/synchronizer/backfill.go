package synchronizer

import (
	"context"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/store"
)

// Backfills (issue 27). The leader moves every open backfill on: it starts its next runs
// as earlier ones end, at most max_parallel under way, stops it when its job or deployment
// went, and finishes it. Each step is one transaction under the backfill's row lock,
// fenced by the lease (Store.AdvanceBackfill), and all state is in the database, so a new
// leader simply goes on. A step runs at the start of a term, on every NOTIFY of the API (a
// backfill created or cancelled), after every final status the tracker writes (a run
// ended: its slot is free), and every BackfillInterval in case a signal was lost.

// DefaultBackfillInterval is the period of the backfill pass that needs no signal.
const DefaultBackfillInterval = 10 * time.Second

// backfills is the term's backfill loop and its wake-up signal.
type backfills struct {
	wake chan struct{}
}

func newBackfills() *backfills { return &backfills{wake: make(chan struct{}, 1)} }

// kick asks for a pass soon; kicks while one is pending are one pass.
func (b *backfills) kick() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// runBackfills advances the open backfills until ctx ends.
func (t *execTerm) runBackfills(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		listenLoop(ctx, t.x.db, store.BackfillsChannel, 500*time.Millisecond, t.x.log,
			func(bool) { t.backfill.kick() }, func(string) { t.backfill.kick() })
	})
	ticker := time.NewTicker(t.x.cfg.BackfillInterval)
	defer ticker.Stop()
	for {
		t.advanceBackfills(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.backfill.wake:
		case <-ticker.C:
		}
	}
}

// advanceBackfills takes one step of every open backfill.
func (t *execTerm) advanceBackfills(ctx context.Context) {
	ids, err := t.x.db.OpenBackfills(ctx)
	if err != nil {
		t.x.log.WarnContext(ctx, "backfills_pass_failed", "error", err)
		return
	}
	for _, id := range ids {
		started, finished, err := t.x.db.AdvanceBackfill(ctx, t.fence, id, t.x.cfg.Now())
		switch {
		case err != nil:
			t.x.log.WarnContext(ctx, "backfill_step_failed", "backfill", id, "error", err)
		case finished:
			t.x.log.InfoContext(ctx, "backfill_finished", "backfill", id)
		case len(started) > 0:
			t.x.log.InfoContext(ctx, "backfill_runs_started", "backfill", id, "runs", len(started))
		}
	}
}
